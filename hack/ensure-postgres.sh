#!/usr/bin/env bash
# Makes sure PostgreSQL's server binaries (initdb, postgres) are installed:
# the harness starts a throwaway server from them. As root on Debian/Ubuntu it
# installs the distribution's package; otherwise it says what to do.
set -euo pipefail

found() {
  [[ -n "${HANDOFF_PG_BINDIR:-}" && -x "$HANDOFF_PG_BINDIR/initdb" ]] && return 0
  command -v initdb >/dev/null && command -v postgres >/dev/null && return 0
  compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null
}

if found; then
  exit 0
fi
if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
  echo "postgres: installing the distribution's postgresql package..." >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends postgresql >/dev/null
  found && exit 0
fi
echo "postgres: PostgreSQL server binaries (initdb, postgres) are missing." >&2
echo "  Install them (Debian/Ubuntu: sudo apt-get install postgresql; macOS: brew install postgresql)" >&2
echo "  or set HANDOFF_PG_BINDIR to the directory that holds them." >&2
exit 1
