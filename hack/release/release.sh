#!/usr/bin/env bash
# Writes the release's artifacts into DIST (default dist/), reproducibly:
# two runs of the same commit give the same bytes, so the same SHA256SUMS.
#
#   hack/release/release.sh vX.Y.Z [DIST]      (make release VERSION=vX.Y.Z)
#
# VERSION must be `v` + the workspace version of Cargo.toml. Every timestamp
# is SOURCE_DATE_EPOCH, the commit's time (`git log -1 --format=%ct`).
#
#   handoff-vX.Y.Z-linux-amd64.tar.gz     the static binary, LICENSE, README.md
#   handoff-vX.Y.Z-image-amd64.oci.tar    the image (OCI layout archive), and
#   handoff-vX.Y.Z-image-amd64.digest     its manifest digest
#   install.yaml                          CRDs + config/default, image by digest
#   crds.yaml                             the CRDs alone
#   tenant.yaml                           config/tenant (namespace `tenant`)
#   console.yaml                          config/console (opt-in, beside install.yaml), image by digest
#   handoff-X.Y.Z.tgz                     the Helm chart (charts/handoff)
#   handoff-vX.Y.Z.cdx.json               CycloneDX SBOM of the binary's crates
#   handoff.yaml                          the krew plugin manifest
#   SHA256SUMS                            of all of the above
#
# Tools: the static binary (hack/e2e/handoff-static.sh, reused when built),
# kustomize (hack/tools/build.sh), cargo-cyclonedx (installed by version
# into the tools cache), the test kit's `release-image` bin for the image.
#
#   IMAGE_REPO   the image's repository (ghcr.io/handoff-dev/handoff)
#   RELEASE_URL  where the release's files are downloaded from
#                (https://github.com/handoff-dev/handoff/releases/download)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
here="$root/hack/release"
# shellcheck source=lib.sh
source "$here/lib.sh"

version="${1:-}"
dist="${2:-$root/dist}"
image_repo="${IMAGE_REPO:-ghcr.io/handoff-dev/handoff}"
release_url="${RELEASE_URL:-https://github.com/handoff-dev/handoff/releases/download}"

workspace_version="$(workspace_version "$root/Cargo.toml")"
check_version "$version" "$workspace_version" || exit 1
number="${version#v}"

SOURCE_DATE_EPOCH="$(git -C "$root" log -1 --format=%ct)"
export SOURCE_DATE_EPOCH
if [[ -n "$(git -C "$root" status --porcelain --untracked-files=no)" ]]; then
  echo "release: warning: the work tree has uncommitted changes; the artifacts are not those of $(git -C "$root" rev-parse --short HEAD)" >&2
fi

started=$SECONDS
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
rm -rf "$dist"
mkdir -p "$dist"
echo "release: $version into $dist (SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH)" >&2

# The cargo builds run without SOURCE_DATE_EPOCH: cc-rs's build scripts
# (ring, psm, libsqlite3-sys) rerun when it changes, so with it every
# commit would rebuild everything and never reuse what `make
# e2e-image-binary` built. Their archives are deterministic either way.
step "the static binary"
binary="$(env -u SOURCE_DATE_EPOCH "$root/hack/e2e/handoff-static.sh" | tail -n 1)"

step "the binary's tarball"
package="handoff-$version-linux-amd64"
tarball="$package.tar.gz"
mkdir -m 0755 "$stage/$package"
install -m 0755 "$binary" "$stage/$package/handoff"
install -m 0644 "$root/LICENSE" "$root/README.md" "$stage/$package/"
reproducible_tgz "$stage" "$package" > "$dist/$tarball"

step "the image (OCI archive)"
image="handoff-$version-image-amd64.oci.tar"
digest="$(cd "$root" && env -u SOURCE_DATE_EPOCH "${CARGO:-cargo}" run --locked -q -p handoff-testkit --bin release-image -- \
  "$binary" "$image_repo:$version" "$dist/$image" | tail -n 1)"
[[ "$digest" =~ ^sha256:[0-9a-f]{64}$ ]] || { echo "release: release-image printed no digest ($digest)" >&2; exit 1; }
echo "$digest" > "$dist/handoff-$version-image-amd64.digest"
echo "release: $image_repo:$version is $digest" >&2

step "install.yaml, crds.yaml, tenant.yaml, console.yaml (kustomize)"
kustomize="$("$root/hack/tools/build.sh" kustomize | tail -n 1)"
mkdir "$stage/src"
(cd "$root" && git ls-files -z config crds | tar --null -T - -cf -) | tar -xf - -C "$stage/src"
for dir in default console; do
  (cd "$stage/src/config/$dir" && "$kustomize" edit set image "handoff=$image_repo@$digest")
done
{
  echo "# handoff $version: kubectl apply --server-side -f install.yaml"
  "$kustomize" build "$stage/src/config/default"
} > "$dist/install.yaml"
"$kustomize" build "$stage/src/config/crd" > "$dist/crds.yaml"
"$kustomize" build "$stage/src/config/tenant" > "$dist/tenant.yaml"
{
  echo "# handoff $version's console (opt-in, behind your authenticating proxy): kubectl apply --server-side -f console.yaml"
  "$kustomize" build "$stage/src/config/console"
} > "$dist/console.yaml"

step "the Helm chart"
"$here/chart.sh" "$root/charts/handoff" "$number" "$version" "$image_repo" "$digest" "$stage/chart" \
  > "$dist/handoff-$number.tgz"

step "the SBOM (cargo-cyclonedx)"
"$here/sbom.sh" "$root" "$stage/sbom" > "$dist/handoff-$version.cdx.json"

step "the krew plugin manifest"
krew_manifest "$version" "$release_url/$version/$tarball" "$(sha256_of "$dist/$tarball")" "$package" \
  > "$dist/handoff.yaml"

step "SHA256SUMS"
(cd "$dist" && LC_ALL=C ls | grep -vx SHA256SUMS | xargs sha256sum > SHA256SUMS)
cat "$dist/SHA256SUMS" >&2
echo "release: $version done in $((SECONDS - started))s" >&2
