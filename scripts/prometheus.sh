#!/usr/bin/env bash
# Prometheus and promtool for the test suite (and for trying the scrape config by hand).
#
#   scripts/prometheus.sh install   install Debian's `prometheus` package when `prometheus` or
#                                   `promtool` is missing; a no-op when both are there
#
# Only the binaries are wanted: the package's own system service (which would listen on :9090
# and scrape nothing of ours) is kept from starting and stopped if it started anyway. The test
# suite runs its own Prometheus on a free port with a config it writes (tests/metrics/).
set -euo pipefail

log() { printf '[prometheus] %s\n' "$*" >&2; }
die() { printf '[prometheus] ERROR: %s\n' "$*" >&2; exit 1; }
have() { command -v "$1" >/dev/null 2>&1; }

install() {
    if have prometheus && have promtool; then return 0; fi
    [ "$(id -u)" -eq 0 ] || die "prometheus is missing (run as root or: sudo apt-get install -y --no-install-recommends prometheus)"
    have apt-get || die "prometheus is missing and apt-get is not available"
    log "installing Debian's prometheus package (its system service is NOT started)..."
    # invoke-rc.d and deb-systemd-invoke honour policy-rc.d's 101: the package's postinst
    # does not start prometheus.service on :9090.
    local policy=/usr/sbin/policy-rc.d created_policy=0 rc=0 aptlog
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod 755 "$policy"; created_policy=1
    fi
    aptlog="$(mktemp /tmp/lb-prometheus-apt.XXXXXX)"
    {
        # Another apt-get (a parallel install) holds the lock for a while: wait for it.
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -qq &&
        # No recommends: they pull in node-exporter, another service we would have to stop.
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
            --no-install-recommends \
            -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold prometheus
    } >"$aptlog" 2>&1 || rc=$?
    [ "$created_policy" -eq 1 ] && rm -f "$policy"
    if [ "$rc" -ne 0 ]; then
        tail -n 20 "$aptlog" >&2; die "apt-get install prometheus failed (full log: $aptlog)"
    fi
    rm -f "$aptlog"
    if have systemctl; then systemctl disable --now prometheus >/dev/null 2>&1 || true; fi
    have prometheus && have promtool || die "prometheus/promtool still missing after install"
}

case "${1:-}" in
    install) install ;;
    *) echo "usage: $0 install" >&2; exit 2 ;;
esac
