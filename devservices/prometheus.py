"""Prometheus and promtool for the test suite (and for trying the scrape config by hand):
Debian's `prometheus` package when either is missing, a no-op when both are there.

Only the binaries are wanted: the package's own system service (which would listen on :9090 and
scrape nothing of ours) is kept from starting and disabled. The suite runs its own Prometheus on
a free port with a config it writes (tests/metrics/).
"""

from __future__ import annotations

import subprocess

from devservices.errors import ServiceError, log
from devservices.installs import apt_install
from devservices.processes import have, is_root

WHO = "prometheus"


def installed() -> bool:
    return have("prometheus") and have("promtool")


def ensure_installed() -> None:
    if installed():
        return
    if not is_root():
        raise ServiceError(
            "prometheus is missing (run as root or: sudo apt-get install -y "
            "--no-install-recommends prometheus)"
        )
    log("installing Debian's prometheus package (its system service is NOT started)...")
    # No recommends (apt_install never takes them): they pull in node-exporter, another
    # service to stop.
    apt_install(["prometheus"], who=WHO)
    if have("systemctl"):
        subprocess.run(
            ["systemctl", "disable", "--now", "prometheus"], capture_output=True, check=False
        )
    if not installed():
        raise ServiceError("prometheus/promtool still missing after install")
