#!/usr/bin/env bash
# The CycloneDX SBOM (JSON, spec 1.5) of the `handoff` binary's crates for
# x86_64-unknown-linux-gnu, build-time dependencies left out, on stdout.
#
#   hack/release/sbom.sh ROOT STAGE
#
# cargo-cyclonedx (the CycloneDX project's tool) is installed by version
# into ${HANDOFF_CACHE_DIR:-~/.cache/handoff}/tools/cargo-cyclonedx-VERSION.
# It honours SOURCE_DATE_EPOCH: the timestamp is that instant and the
# random serial number is left out. It writes one file beside each
# workspace member's Cargo.toml, so it runs on a copy of the tracked
# sources in STAGE, not in the work tree. Its `bom-ref`s name the workspace
# members by absolute path (cargo's package ids, `path+file:///…`), for
# which it has no option: that one prefix, STAGE, is rewritten to `/src`
# (as the binary's embedded paths are), so the output is reproducible.
set -euo pipefail

cyclonedx_version=0.5.9
root="${1:?usage: sbom.sh ROOT STAGE}"
stage="${2:?usage: sbom.sh ROOT STAGE}"
: "${SOURCE_DATE_EPOCH:?the SBOM is reproducible only with SOURCE_DATE_EPOCH set}"

cache_root="${HANDOFF_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/handoff}"
tool_root="$cache_root/tools/cargo-cyclonedx-$cyclonedx_version"
if [[ ! -x "$tool_root/bin/cargo-cyclonedx" ]]; then
  echo "release: installing cargo-cyclonedx $cyclonedx_version into $tool_root (a few minutes, once)..." >&2
  build="$(mktemp -d)"
  cargo install --locked --quiet --root "$tool_root" --target-dir "$build" \
    cargo-cyclonedx --version "$cyclonedx_version"
  rm -rf "$build"
fi

mkdir -p "$stage"
(cd "$root" && git ls-files -z --cached | tar --null -T - -cf -) | tar -xf - -C "$stage"
(cd "$stage" && "$tool_root/bin/cargo-cyclonedx" cyclonedx --quiet --format json --spec-version 1.5 \
  --target x86_64-unknown-linux-gnu --no-build-deps --override-filename handoff-sbom)
escaped="$(printf '%s' "$stage" | sed 's/[.[\*^$|]/\\&/g')"
sed "s|file://$escaped|file:///src|g" "$stage/handoff-sbom.json"
