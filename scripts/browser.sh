#!/usr/bin/env bash
# Install Debian's chromium when it is missing: the browser tests (tests/browser/) drive it through
# Playwright's executable_path, so nothing is downloaded from outside the Debian mirror.
# Safe to run twice: it does nothing when a chromium is on the PATH (or LB_CHROMIUM points to one).
set -euo pipefail

found() {
    if [ -n "${LB_CHROMIUM:-}" ] && [ -x "$LB_CHROMIUM" ]; then return 0; fi
    command -v chromium >/dev/null 2>&1
}

found && exit 0
if [ "$(id -u)" -ne 0 ]; then
    echo "browser.sh: chromium is missing (run as root or: sudo apt-get install -y chromium)" >&2
    exit 1
fi
command -v apt-get >/dev/null 2>&1 || { echo "browser.sh: chromium is missing and apt-get is not available" >&2; exit 1; }
echo "browser.sh: installing Debian's chromium via apt-get..."
log="/tmp/lb-browser-apt.$$.log"
if ! {
    DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        -o DPkg::Lock::Timeout=300 chromium fonts-dejavu-core
} >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    echo "browser.sh: apt-get install chromium failed (full log: $log)" >&2
    exit 1
fi
rm -f "$log"
found
