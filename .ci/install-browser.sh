#!/usr/bin/env bash
# Find (or install) the Chromium-family browser that tests/test_browser.py drives through
# Playwright's Python package (`playwright install` downloads a browser; never needed here).
#
#   .ci/install-browser.sh      # as root, or as a user with password-less sudo, when it must install
#
# Looks, in order, at $CHROMIUM, chromium-headless-shell, chromium, chromium-browser, google-chrome,
# google-chrome-stable and $CHROME_BIN, and uses the first that renders a page headless. The headless
# shell comes first: it is what Playwright itself runs headless, and it took a quarter less CPU here.
# GitHub's ubuntu-latest image has two others: its own Chromium build (/usr/bin/chromium) and Google
# Chrome (/usr/bin/google-chrome, also $CHROME_BIN).
# Ubuntu's chromium-browser package is a stub that installs a snap, which a runner or a container
# cannot start: it never counts. When nothing is found, installs Debian's chromium-headless-shell.
# It prints what it used; under GitHub Actions it also sets CHROMIUM for the later steps.
set -euo pipefail

say() { echo "install-browser: $*"; }
die() { echo "install-browser: error: $*" >&2; exit 1; }

# Starts headless and renders a page: proves the browser and its libraries work.
works() {
  timeout 60 "$1" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
    --disable-background-networking --dump-dom "data:text/html,<p>ok</p>" 2>/dev/null | grep -q "<p>ok</p>"
}

is_snap() {
  case "$(readlink -f "$1")" in /snap/*) return 0 ;; esac
  # the stub is a short shell script that asks for the snap
  [ "$(head -c 2 "$1")" = "#!" ] && grep -q snap "$1"
}

use() {
  say "using $("$1" --version 2>/dev/null || echo "$1") at $1"
  if [ -n "${GITHUB_ENV:-}" ]; then
    echo "CHROMIUM=$1" >> "$GITHUB_ENV"
    say "set CHROMIUM=$1 for the next steps"
  fi
  exit 0
}

if [ -n "${CHROMIUM:-}" ]; then
  [ -x "$CHROMIUM" ] || die "CHROMIUM=$CHROMIUM is not an executable file: point it to a Chromium or Chrome binary."
  works "$CHROMIUM" || die "CHROMIUM=$CHROMIUM does not start headless; run it by hand to see why."
  use "$CHROMIUM"
fi

for name in chromium-headless-shell chromium chromium-browser google-chrome google-chrome-stable ${CHROME_BIN:-}; do
  path=$(command -v "$name" 2>/dev/null) || continue
  if is_snap "$path"; then say "skipping $path: it is a snap stub, which cannot run here"; continue; fi
  if works "$path"; then use "$path"; fi
  say "skipping $path: it does not start headless"
done

say "no working Chromium or Chrome found"
command -v apt-get >/dev/null || die "no apt-get here: install Chromium or Google Chrome with this system's package manager, then set CHROMIUM=/path/to/it."
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  die "installing Chromium needs root: run this script as root or with sudo."
fi

say "installing chromium-headless-shell and fonts-dejavu-core with apt-get"
"${as_root[@]}" apt-get update -qq || die "apt-get update failed (is a package mirror reachable?)."
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  chromium-headless-shell fonts-dejavu-core || die "apt-get install chromium-headless-shell failed (Ubuntu has no such package): install Google Chrome's .deb and set CHROMIUM=/path/to/google-chrome."
path=/usr/bin/chromium-headless-shell
{ [ -x "$path" ] && ! is_snap "$path"; } || die "apt-get installed no usable $path (on Ubuntu it is a snap stub): install Google Chrome's .deb and set CHROMIUM=/path/to/google-chrome."
works "$path" || die "$path was installed but does not start headless; run it by hand to see why."
use "$path"
