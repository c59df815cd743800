#!/usr/bin/env bash
# The `handoff` binary of the local e2e image, statically linked (issue 30:
# the node runs the project's image with no registry, FROM scratch-like).
#
# musl is not assumed; glibc links statically with `crt-static`. The explicit
# --target keeps RUSTFLAGS away from build scripts and proc macros, which
# must stay dynamic to load into the host's rustc. glibc >= 2.34 carries the
# `files` and `dns` NSS modules inside libc, so a static binary still
# resolves host names with no /etc/nsswitch.conf.
#
# The workspace and cargo's home are remapped in the binary's embedded paths
# (panic locations), so the bytes do not depend on where the checkout or the
# registry lives: `make release` ships this binary and must be reproducible.
#
# Prints the binary's path on the last line of stdout; fails when the result
# has an ELF interpreter (PT_INTERP), that is when it is not static.
#
#   CARGO=cargo   the cargo to use
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
target=x86_64-unknown-linux-gnu
bin="${CARGO_TARGET_DIR:-$root/target}/$target/release/handoff"

# A caller inside `cargo test` (the release tier, tests/release.rs) passes
# cargo's per-package variables down, and ring's build script reruns when
# CARGO_MANIFEST_DIR changes: each such caller rebuilt the binary (~4 min).
# The build runs without them, so make, the release and the tests share one.
for name in $(compgen -e); do
  case "$name" in
    CARGO_MANIFEST_*|CARGO_PKG_*|CARGO_BIN_EXE_*|CARGO_CRATE_NAME|CARGO_PRIMARY_PACKAGE|CARGO_TARGET_TMPDIR)
      unset "$name" ;;
  esac
done

started=$SECONDS
echo "e2e: building the static handoff binary (release, $target, crt-static)..." >&2
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
rustflags="-C target-feature=+crt-static --remap-path-prefix=$root=/src --remap-path-prefix=$cargo_home=/cargo"
(cd "$root" && RUSTFLAGS="$rustflags" CARGO_PROFILE_RELEASE_STRIP=symbols \
  "${CARGO:-cargo}" build --release --locked --bin handoff --target "$target")
echo "e2e: built the static handoff binary in $((SECONDS - started))s" >&2

# A dynamically linked ELF names its loader in a PT_INTERP program header.
if LC_ALL=C readelf --program-headers --wide "$bin" | grep -q INTERP; then
  echo "e2e: $bin is not static (it has an ELF interpreter)" >&2
  exit 1
fi
"$bin" --version >&2
echo "$bin"
