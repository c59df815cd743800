#!/usr/bin/env bash
# The e2e node's parts (issue: a real node beside the control plane):
#
#  - kubelet, kube-controller-manager, kube-scheduler and kube-proxy, built
#    from the same wrapper module and version as kube-apiserver
#    (hack/envtest/kube), and CoreDNS (hack/e2e/coredns; the node runs it
#    as a host process), once per version, into a cache directory printed
#    on the last line of stdout;
#  - beside them, the node's own small programs, static (CGO_ENABLED=0) so
#    that each is an image's only file: the sandbox container
#    (hack/e2e/pause) and the scripted agent (hack/e2e/agent). They are
#    sources of this repository, not versions, so they are rebuilt on
#    every run (about a second each from Go's build cache);
#  - the container runtime: containerd, runc and the CNI plugins, from the
#    distribution's packages. As root with apt it installs them; otherwise
#    it prints the command and fails.
#
#   HANDOFF_CACHE_DIR=dir    cache root (default: ${XDG_CACHE_HOME:-~/.cache}/handoff)
#
# Cold, on two cores: about 2 minutes for the Kubernetes commands and 2 for
# CoreDNS, with the module downloads; Go's caches make a rebuild cheap, and
# the finished binaries are reused as long as the versions do not change.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../envtest/versions.env
source "$here/../envtest/versions.env"
tag=e2e
# shellcheck source=../lib/go-cache.sh
source "$here/../lib/go-cache.sh"

kube_commands=(kubelet kube-controller-manager kube-scheduler kube-proxy)
local_programs=(pause agent)
packages=(containerd runc containernetworking-plugins)

# The runtime's binaries; Debian's CNI plugins live in /usr/lib/cni.
runtime_found() {
  command -v containerd >/dev/null && command -v runc >/dev/null &&
    { [[ -x /usr/lib/cni/bridge ]] || [[ -x /opt/cni/bin/bridge ]]; }
}

ensure_runtime() {
  runtime_found && return 0
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "e2e: installing ${packages[*]}..." >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
    runtime_found && return 0
  fi
  echo "e2e: the container runtime is missing (containerd, runc, the CNI plugins)." >&2
  echo "  Install it as root (Debian/Ubuntu: sudo apt-get install ${packages[*]})." >&2
  exit 1
}

ensure_runtime

dest="$cache_root/e2e/k8s-${KUBE_VERSION}-coredns-${COREDNS_VERSION}"
start_stage "$dest" "the node"

built=()
for c in "${kube_commands[@]}"; do
  all_built "$dest" "$c" && continue
  go_build "$here/../envtest/kube" "k8s.io/kubernetes/cmd/$c" "$c" "$(kube_ldflags)"
  built+=("$c")
done
if ! all_built "$dest" coredns; then
  go_build "$here/coredns" github.com/coredns/coredns coredns "-s -w"
  built+=(coredns)
fi
if [[ ${#built[@]} -eq 0 ]]; then
  echo "$tag: cached binaries in $dest" >&2
fi
for p in "${local_programs[@]}"; do
  CGO_ENABLED=0 go_build "$here/$p" "handoff.dev/hack/e2e/$p" "$p" "-s -w"
  built+=("$p")
done
publish "$dest" "${built[@]}"
"$dest/kubelet" --version >&2
"$dest/coredns" -version | sed -n 1p >&2
echo "$dest"
