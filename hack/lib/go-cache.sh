# Sourced by hack/envtest/build.sh, hack/e2e/build.sh and hack/tools/build.sh: binaries built
# from Go modules once per version into a cache directory. Each script sets
# `tag` (its log prefix) before sourcing this.

# The cache root: HANDOFF_CACHE_DIR, else ${XDG_CACHE_HOME:-~/.cache}/handoff.
cache_root="${HANDOFF_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/handoff}"

# all_built DIR BIN...: whether DIR holds every BIN, executable.
all_built() {
  local dir="$1"; shift
  for b in "$@"; do [[ -x "$dir/$b" ]] || return 1; done
}

# use_cached DIR BIN...: when DIR is complete, says so, prints DIR and exits.
use_cached() {
  if all_built "$@"; then
    echo "$tag: cached binaries in $1" >&2
    echo "$1"
    exit 0
  fi
}

# start_stage DEST WHAT: needs Go (to build WHAT), creates DEST and a staging
# directory beside it in `stage`, removed on exit.
start_stage() {
  command -v go >/dev/null || { echo "$tag: Go is required to build $2 (https://go.dev/doc/install)" >&2; exit 1; }
  mkdir -p "$1"
  stage="$(mktemp -d "$1.stage.XXXXXX")"
  trap 'rm -rf "$stage"' EXIT
}

# The ldflags of a Kubernetes command at KUBE_VERSION: its version stamps.
kube_ldflags() {
  local minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
  local pkg=k8s.io/component-base/version
  echo "-s -w -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
}

# go_build MODULE-DIR PACKAGE OUTPUT LDFLAGS: builds PACKAGE of the module in
# MODULE-DIR into $stage/OUTPUT, saying so (with `build_hint` after the
# first line when set).
go_build() {
  local started=$SECONDS
  echo "$tag: building $3 from $2${build_hint:+ ($build_hint)}..." >&2
  (cd "$1" && go build -buildvcs=false -trimpath -ldflags "$4" -o "$stage/$3" "$2")
  echo "$tag: built $3 in $((SECONDS - started))s" >&2
}

# publish DEST BIN...: moves each built BIN from the stage into DEST.
publish() {
  local dest="$1"; shift
  for b in "$@"; do mv -f "$stage/$b" "$dest/$b"; done
}
