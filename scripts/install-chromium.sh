#!/bin/sh
# install-chromium.sh installs the headless browser the dashboard's browser
# test (testnet/uitest) drives: Debian's chromium package. It does nothing
# when a Chromium is already on PATH, and only prints what to do when it is
# not run as root.
set -eu

for b in chromium chromium-browser google-chrome headless-shell; do
	if command -v "$b" >/dev/null 2>&1; then
		echo "install-chromium: $b is already installed at $(command -v "$b")"
		exit 0
	fi
done

if [ "$(id -u)" -ne 0 ]; then
	echo "install-chromium: not root; run: sudo apt-get install -y chromium" >&2
	exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "install-chromium: no apt-get here; install Chromium with this system's package manager" >&2
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive
# Wait for another apt/dpkg run to release its lock instead of failing.
apt-get -o DPkg::Lock::Timeout=300 update
apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends chromium fonts-dejavu-core
command -v chromium
chromium --version
