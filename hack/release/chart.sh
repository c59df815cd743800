#!/usr/bin/env bash
# The packaged Helm chart on stdout: `helm package` of a copy of the chart
# whose values pin the released image by digest.
#
#   hack/release/chart.sh CHART_DIR NUMBER VERSION IMAGE_REPO DIGEST STAGE
#
# `helm package` (v4) is reproducible when SOURCE_DATE_EPOCH is set (helm
# stamps every entry with it; without it, the files' mtimes on disk leak
# in), and release.sh sets it. The copy in STAGE holds the chart's tracked
# files, values.yaml's `image.repository` and `image.digest` set to the
# released image, so the chart's default pins the image like install.yaml;
# `--version NUMBER --app-version VERSION` set Chart.yaml's.
#
#   HELM   the helm to use (default: hack/tools/build.sh helm)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

chart="${1:?usage: chart.sh CHART_DIR NUMBER VERSION IMAGE_REPO DIGEST STAGE}"
number="${2:?}" version="${3:?}" repo="${4:?}" digest="${5:?}" stage="${6:?}"
name="$(basename "$chart")"

mkdir -p "$stage/$name"
(cd "$chart" && git ls-files -z . | tar --null -T - -cf -) | tar -xf - -C "$stage/$name"

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

set_image "$stage/$name/values.yaml" repository "$repo"
set_image "$stage/$name/values.yaml" digest "\"$digest\""
helm="${HELM:-$("$here/../tools/build.sh" helm | tail -n 1)}"
: "${SOURCE_DATE_EPOCH:?helm package is reproducible only with SOURCE_DATE_EPOCH set}"
"$helm" package "$stage/$name" --version "$number" --app-version "$version" \
  --destination "$stage/out" >&2
cat "$stage/out/$name-$number.tgz"
