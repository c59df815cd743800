#!/usr/bin/env bash
# Builds one developer tool (helm, actionlint, kustomize, ...) from the Go
# module proxy, once per version, into the cache, and prints the binary's
# path on the last line of stdout.
#
#   hack/tools/build.sh NAME
#
# Each tool has a wrapper module, hack/tools/NAME/go.mod, whose single
# `tool` directive names the package to build and whose `require` pins its
# version (bump with `go get -tool PACKAGE@VERSION` in that directory). The
# cache key is NAME plus the hash of the wrapper's go.sum, so a bump
# rebuilds and anything else reuses:
#   ${HANDOFF_CACHE_DIR:-~/.cache/handoff}/tools/NAME-<go.sum hash>/NAME
set -euo pipefail

name="${1:?usage: hack/tools/build.sh NAME (a directory under hack/tools)}"
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
# (use_cached would print the directory: callers want the binary.)
if all_built "$dest" "$name"; then
  echo "$tag: cached $name in $dest" >&2
  echo "$dest/$name"
  exit 0
fi
start_stage "$dest" "$name"

build_hint="a cold build takes minutes on 2 cores; cached by version afterwards"
go_build "$module" "$package" "$name" "-s -w"
publish "$dest" "$name"
echo "$dest/$name"
