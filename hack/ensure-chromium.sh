#!/usr/bin/env bash
# Makes sure Chromium and its ChromeDriver are installed: the console's
# browser tests (tests/console/browser_*.rs) drive a real headless Chromium
# through chromedriver. Debian ships both from one source package, so their
# versions always agree. As root on Debian/Ubuntu it installs the
# distribution's packages (saying so, with apt's progress); otherwise it says
# what to do. Prints nothing when both are there.
set -euo pipefail

chromium="${CHROMIUM:-/usr/bin/chromium}"
chromedriver="${CHROMEDRIVER:-/usr/bin/chromedriver}"

found() {
  [[ -x "$chromium" && -x "$chromedriver" ]]
}

if found; then
  exit 0
fi
if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
  echo "chromium: installing the distribution's chromium and chromium-driver packages (about 130 MB)..." >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y --no-install-recommends chromium chromium-driver
  found && exit 0
fi
echo "chromium: $chromium or $chromedriver is missing (the console's browser tests need both)." >&2
echo "  Install them (Debian: sudo apt-get install --no-install-recommends chromium chromium-driver;" >&2
echo "  Ubuntu's chromium is a snap: install Google Chrome and its matching chromedriver instead)" >&2
echo "  or set CHROMIUM and CHROMEDRIVER to the binaries." >&2
exit 1
