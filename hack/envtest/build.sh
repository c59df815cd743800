#!/usr/bin/env bash
# Builds kube-apiserver, kubectl and etcd from the Go module proxy, once, into a
# cache directory keyed by version, and prints that directory on the last line
# of stdout (what KUBEBUILDER_ASSETS should point at).
#
#   KUBEBUILDER_ASSETS=dir   use that directory as is (like envtest); no build
#   HANDOFF_CACHE_DIR=dir    cache root (default: ${XDG_CACHE_HOME:-~/.cache}/handoff)
#
# A cold build takes many minutes and a few GiB of memory on two cores; Go's
# module and build caches (GOMODCACHE, GOCACHE) make a rebuild cheap, and the
# finished binaries are reused as long as the versions do not change.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

need=(kube-apiserver kubectl etcd)

complete() {
  local dir="$1"
  for b in "${need[@]}"; do [[ -x "$dir/$b" ]] || return 1; done
}

if [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
  if complete "$KUBEBUILDER_ASSETS"; then
    echo "envtest: using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS" >&2
    echo "$KUBEBUILDER_ASSETS"
    exit 0
  fi
  echo "envtest: KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS lacks one of: ${need[*]}" >&2
  exit 1
fi

cache_root="${HANDOFF_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/handoff}"
dest="$cache_root/envtest/k8s-${KUBE_VERSION}-etcd-${ETCD_VERSION}"

if complete "$dest"; then
  echo "envtest: cached binaries in $dest" >&2
  echo "$dest"
  exit 0
fi

command -v go >/dev/null || { echo "envtest: Go is required to build the control plane (https://go.dev/doc/install)" >&2; exit 1; }

mkdir -p "$dest"
stage="$(mktemp -d "$dest.stage.XXXXXX")"
trap 'rm -rf "$stage"' EXIT

minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"

build() { # module-dir package output
  local started=$SECONDS
  echo "envtest: building $3 from $2 (cold builds take 10-30 min on 2 cores; Go caches make the next one fast)..." >&2
  (cd "$here/$1" && go build -buildvcs=false -trimpath -ldflags "$4" -o "$stage/$3" "$2")
  echo "envtest: built $3 in $((SECONDS - started))s" >&2
}

build etcd go.etcd.io/etcd/server/v3 etcd "-s -w"
build kube k8s.io/kubernetes/cmd/kube-apiserver kube-apiserver "$ldflags"
build kube k8s.io/kubernetes/cmd/kubectl kubectl "$ldflags"

for b in "${need[@]}"; do mv -f "$stage/$b" "$dest/$b"; done
"$dest/kube-apiserver" --version >&2
"$dest/etcd" --version | head -1 >&2
echo "$dest"
