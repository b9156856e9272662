#!/usr/bin/env bash
# The system packages that the tests and the recorder use, installed with apt-get where one is missing
# (README.md names them for other systems). Run as root, or as a user with password-less sudo.
#   fonts-wqy-microhei: a Chinese font, so that the browser tests render the Chinese edition (and measure
#   its diagrams' text) as a reader's browser does
set -euo pipefail
packages=(fonts-wqy-microhei)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-system-packages: ${packages[*]} already installed"
  exit 0
fi
command -v apt-get >/dev/null || { echo "install-system-packages: error: no apt-get here: install ${missing[*]} with this system's package manager." >&2; exit 1; }
sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo -n"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-system-packages: installed ${missing[*]}"
