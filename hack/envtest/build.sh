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
tag=envtest
# shellcheck source=../lib/go-cache.sh
source "$here/../lib/go-cache.sh"

need=(kube-apiserver kubectl etcd)

if [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
  if all_built "$KUBEBUILDER_ASSETS" "${need[@]}"; then
    echo "envtest: using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS" >&2
    echo "$KUBEBUILDER_ASSETS"
    exit 0
  fi
  echo "envtest: KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS lacks one of: ${need[*]}" >&2
  exit 1
fi

dest="$cache_root/envtest/k8s-${KUBE_VERSION}-etcd-${ETCD_VERSION}"
use_cached "$dest" "${need[@]}"
start_stage "$dest" "the control plane"

build_hint="cold builds take 10-30 min on 2 cores; Go caches make the next one fast"
go_build "$here/etcd" go.etcd.io/etcd/server/v3 etcd "-s -w"
go_build "$here/kube" k8s.io/kubernetes/cmd/kube-apiserver kube-apiserver "$(kube_ldflags)"
go_build "$here/kube" k8s.io/kubernetes/cmd/kubectl kubectl "$(kube_ldflags)"

publish "$dest" "${need[@]}"
"$dest/kube-apiserver" --version >&2
"$dest/etcd" --version | head -1 >&2
echo "$dest"
