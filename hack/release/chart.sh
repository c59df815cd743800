#!/usr/bin/env bash
# The packaged Helm chart on stdout, what `helm package` writes (a gzip'd
# tar of CHART/…), but reproducible whatever helm's version: the archive
# is written by lib.sh's reproducible_tgz (names sorted, mtimes
# SOURCE_DATE_EPOCH, owner root, no gzip name or time).
#
#   hack/release/chart.sh CHART_DIR NUMBER VERSION IMAGE_REPO DIGEST STAGE
#
# The copy in STAGE holds the chart's tracked files, with Chart.yaml's
# `version: NUMBER` and `appVersion: VERSION`, and values.yaml's
# `image.repository` and `image.digest` set to the released image, so the
# chart's default pins the image by digest like install.yaml does.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$here/lib.sh"

chart="${1:?usage: chart.sh CHART_DIR NUMBER VERSION IMAGE_REPO DIGEST STAGE}"
number="${2:?}" version="${3:?}" repo="${4:?}" digest="${5:?}" stage="${6:?}"
name="$(basename "$chart")"

mkdir -p "$stage/$name"
(cd "$chart" && git ls-files -z . | tar --null -T - -cf -) | tar -xf - -C "$stage/$name"

set_top_level() { # FILE KEY VALUE: the top-level `KEY:` line, which must exist
  local file="$1" key="$2" value="$3"
  grep -q "^$key:" "$file" || { echo "release: $file has no top-level $key:" >&2; return 1; }
  awk -v key="$key" -v value="$value" '$1 == key ":" { print key ": " value; next } { print }' \
    "$file" > "$file.new" && mv "$file.new" "$file"
}

set_image() { # FILE KEY VALUE: KEY under the top-level `image:` map, which must exist
  local file="$1" key="$2" value="$3"
  awk -v key="$key" -v value="$value" '
    /^[^ #]/ { in_image = ($0 ~ /^image:/) }
    in_image && $1 == key ":" { sub(/:.*/, ": " value); found = 1 }
    { print }
    END { exit found ? 0 : 3 }' "$file" > "$file.new" \
    || { echo "release: $file has no image.$key (the release sets it to the image's $key)" >&2; return 1; }
  mv "$file.new" "$file"
}

set_top_level "$stage/$name/Chart.yaml" version "$number"
set_top_level "$stage/$name/Chart.yaml" appVersion "\"$version\""
set_image "$stage/$name/values.yaml" repository "$repo"
set_image "$stage/$name/values.yaml" digest "\"$digest\""
reproducible_tgz "$stage" "$name"
