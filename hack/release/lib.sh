# Sourced by hack/release/*.sh: the small pieces of a reproducible release.

# step WHAT: says which step starts, and how long the release has run.
step() {
  echo "release: [$((SECONDS - ${started:-0}))s] $1..." >&2
}

# workspace_version CARGO_TOML: the `version` of [workspace.package].
workspace_version() {
  awk '/^\[/ { section = $0 } section == "[workspace.package]" && $1 == "version" { gsub(/"/, "", $3); print $3; exit }' "$1"
}

# check_version VERSION WORKSPACE_VERSION: VERSION must be `v` + the
# workspace version; says what is wrong otherwise.
check_version() {
  local version="$1" workspace="$2"
  if [[ -z "$workspace" ]]; then
    echo "release: Cargo.toml has no [workspace.package] version" >&2
    return 1
  fi
  if [[ "$version" != "v$workspace" ]]; then
    echo "release: VERSION must be v$workspace (v + the workspace version of Cargo.toml), got '${version}'; bump Cargo.toml first to release another" >&2
    return 1
  fi
}

# reproducible_tgz DIR NAME: a gzip'd tar of DIR/NAME on stdout, the same
# bytes for the same contents: names sorted, every mtime SOURCE_DATE_EPOCH,
# owner root (numeric), modes normalised, no name or time in the gzip header.
reproducible_tgz() {
  tar --sort=name --mtime="@${SOURCE_DATE_EPOCH:?}" --owner=0 --group=0 --numeric-owner \
    --mode='u+rwX,go+rX,go-w' --format=gnu -C "$1" -cf - "$2" | gzip -n -9
}

# sha256_of FILE: its hex SHA-256.
sha256_of() {
  sha256sum "$1" | cut -d' ' -f1
}

# krew_manifest VERSION URI SHA256 DIR: krew's Plugin for the tarball at URI,
# whose files are under DIR/. The binary is installed as `kubectl-handoff`,
# the name under which it answers as `kubectl handoff`.
krew_manifest() {
  local version="$1" uri="$2" sha="$3" dir="$4"
  cat <<EOF
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: handoff
spec:
  version: $version
  homepage: https://github.com/handoff-dev/handoff
  shortDescription: Hand work between AI agents on Kubernetes
  description: |
    The handoff CLI as a kubectl plugin: read and write Handoffs (compact
    continuations of an AI agent's work, stored as custom resources),
    transcripts, hooks for Claude Code and Codex, and the MCP bridge over
    stdio. The cluster needs handoff installed (install.yaml or the chart).
  platforms:
    - selector:
        matchLabels:
          os: linux
          arch: amd64
      uri: $uri
      sha256: $sha
      files:
        - from: $dir/handoff
          to: kubectl-handoff
        - from: $dir/LICENSE
          to: .
      bin: kubectl-handoff
EOF
}
