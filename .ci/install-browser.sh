#!/usr/bin/env bash
# Install the browser that tests/test_browser.py drives: the system Chromium, through
# Playwright's Python package (`playwright install` downloads a browser; never needed here).
#
#   .ci/install-browser.sh      # as root, or as a user with password-less sudo
#
# Idempotent: when a usable Chromium is there already, it says so and changes nothing.
# Installs only what a headless run with screenshots needs: chromium, and one font
# family (DejaVu: sans, serif and mono, with the Greek and maths signs the diagrams use).
set -euo pipefail

say() { echo "install-browser: $*"; }
die() { echo "install-browser: error: $*" >&2; exit 1; }

# Starts headless and renders a page: proves the browser and its libraries work.
works() {
  "$1" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
    --disable-background-networking --dump-dom "data:text/html,<p>ok</p>" 2>/dev/null | grep -q "<p>ok</p>"
}

chromium=${CHROMIUM:-/usr/bin/chromium}
if [ -x "$chromium" ]; then
  works "$chromium" || die "$chromium is installed but does not start headless; run it by hand to see why."
  say "$("$chromium" --version 2>/dev/null || echo "$chromium") is already installed, nothing to do."
  exit 0
fi

command -v apt-get >/dev/null || die "no apt-get here: install Chromium with this system's package manager, then set CHROMIUM=/path/to/chromium for the tests."

if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  die "installing Chromium needs root: run this script as root or with sudo."
fi

say "installing chromium and fonts-dejavu-core with apt-get"
"${as_root[@]}" apt-get update -qq || die "apt-get update failed (is a package mirror reachable?)."
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  chromium fonts-dejavu-core || die "apt-get install chromium fonts-dejavu-core failed."

# On Ubuntu, `chromium` is a stub that installs a snap, which a container cannot run.
[ -x /usr/bin/chromium ] || die "apt-get installed no /usr/bin/chromium (on Ubuntu the package is a snap stub): install Google Chrome or a Chromium .deb and set CHROMIUM=/path/to/it."
works /usr/bin/chromium || die "/usr/bin/chromium was installed but does not start headless; run it by hand to see why."
say "$(/usr/bin/chromium --version 2>/dev/null) installed."
