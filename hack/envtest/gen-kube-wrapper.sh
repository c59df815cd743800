#!/usr/bin/env bash
# Regenerates hack/envtest/kube/go.mod for a Kubernetes version: requires
# k8s.io/kubernetes at that tag and replaces every staging module (the
# `=> ./staging/src/...` lines of Kubernetes' own go.mod) with its published
# v0.Y.Z, then records kube-apiserver, kubectl and the node's commands
# (kubelet, kube-controller-manager, kube-scheduler, kube-proxy) as tools. Update
# KUBE_VERSION in versions.env and the k8s-openapi feature to match.
#
#   hack/envtest/gen-kube-wrapper.sh v1.37.2
set -euo pipefail

version="${1:?usage: $0 vX.Y.Z}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
staging_version="v0.${version#v1.}"

upstream_mod="$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')"
[[ -f "$upstream_mod" ]] || { echo "cannot download k8s.io/kubernetes@$version" >&2; exit 1; }
go_directive="$(awk '/^go /{print $2; exit}' "$upstream_mod")"

cd "$here/kube"
{
  echo "// Wrapper module that builds kube-apiserver and kubectl (the control plane), and"
  echo "// kubelet, kube-controller-manager, kube-scheduler and kube-proxy (the e2e node),"
  echo "// from the Go module proxy."
  echo "// Kubernetes' own go.mod requires its staging modules at v0.0.0 with local replaces;"
  echo "// this module replaces each of them with its published v0.Y.Z instead."
  echo "// Regenerate with: hack/envtest/gen-kube-wrapper.sh <kubernetes version>"
  echo "module handoff.dev/hack/envtest/kube"
  echo
  echo "go $go_directive"
  echo
  echo "require k8s.io/kubernetes $version"
  echo
  echo "replace ("
  grep -E '=> ./staging' "$upstream_mod" | awk -v v="$staging_version" '{print "\t"$1" => "$1" "v}'
  echo ")"
} > go.mod
rm -f go.sum
go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@$version"
go get -tool "k8s.io/kubernetes/cmd/kubectl@$version"
for node in kubelet kube-controller-manager kube-scheduler kube-proxy; do
  go get -tool "k8s.io/kubernetes/cmd/$node@$version"
done
echo "hack/envtest/kube/go.mod now builds Kubernetes $version (go $go_directive)" >&2
