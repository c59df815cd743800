#!/usr/bin/env bash
# Builds one developer tool (helm, actionlint, kustomize, promtool, ...) from the Go
# module proxy, once per version, into the cache, and prints the binary's
# path on the last line of stdout.
#
#   hack/tools/build.sh NAME
#   hack/tools/build.sh --cached NAME   only print the cached binary's path;
#                                        exit 2 (naming `make NAME`) when
#                                        it is not built (tests use this)
#
# Each tool has a wrapper module, hack/tools/NAME/go.mod, whose single
# `tool` directive names the package to build and whose `require` pins its
# version (bump with `go get -tool PACKAGE@VERSION` in that directory). The
# cache key is NAME plus the hash of the wrapper's go.sum, so a bump
# rebuilds and anything else reuses:
#   ${HANDOFF_CACHE_DIR:-~/.cache/handoff}/tools/NAME-<go.sum hash>/NAME
set -euo pipefail

cached_only=false
if [[ "${1:-}" == --cached ]]; then cached_only=true; shift; fi
name="${1:?usage: hack/tools/build.sh [--cached] NAME (a directory under hack/tools)}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
module="$here/$name"
[[ -f "$module/go.mod" ]] || { echo "tools: no wrapper module $module/go.mod" >&2; exit 1; }
tag="tools/$name"
# shellcheck source=../lib/go-cache.sh
source "$here/../lib/go-cache.sh"

package="$(awk '$1 == "tool" { print $2; exit }' "$module/go.mod")"
[[ -n "$package" ]] || { echo "$tag: $module/go.mod has no tool directive" >&2; exit 1; }
key="$(sha256sum "$module/go.sum" | cut -c1-16)"
dest="$cache_root/tools/$name-$key"
# (not use_cached, which prints the directory: this prints the binary)
if all_built "$dest" "$name"; then
  echo "$tag: cached $dest/$name" >&2
  echo "$dest/$name"
  exit 0
fi
if $cached_only; then
  echo "$tag: $name is not built (no $dest/$name): run \`make $name\`" >&2
  exit 2
fi
start_stage "$dest" "$name"

# tool_ldflags: the version stamps a tool's own `NAME version` reports; the
# version is the one the wrapper's go.mod requires.
tool_ldflags() {
  case "$name" in
    helm)
      local version pkg=helm.sh/helm/v4/internal/version
      version="$(cd "$module" && go list -m -f '{{.Version}}' helm.sh/helm/v4)"
      echo "-s -w -X $pkg.version=$version -X $pkg.metadata= -X $pkg.gitTreeState=clean" ;;
    promtool)
      # Prometheus publishes release 3.X.Y as module v0.3XX.Y (v0.316.0 is
      # 3.16.0); `promtool --version` prints what prometheus/common's
      # version package was given.
      local module_version minor patch pkg=github.com/prometheus/common/version
      module_version="$(cd "$module" && go list -m -f '{{.Version}}' github.com/prometheus/prometheus)"
      minor="${module_version#v0.}"; patch="${minor#*.}"; minor="${minor%%.*}"
      echo "-s -w -X $pkg.Version=$((10#$minor / 100)).$((10#$minor % 100)).$patch -X $pkg.Branch=release" ;;
    *) echo "-s -w" ;;
  esac
}

build_hint="a cold build takes minutes on 2 cores; cached by version afterwards"
go_build "$module" "$package" "$name" "$(tool_ldflags)"
publish "$dest" "$name"
echo "$dest/$name"
