"""Debian's chromium for the browser tests (tests/browser/ drive it through Playwright's
executable_path, so nothing is downloaded from outside the Debian mirror). A no-op when a
chromium is on the PATH or LB_CHROMIUM points to one."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from devservices.errors import ServiceError, log
from devservices.installs import apt_install
from devservices.processes import have, is_root

WHO = "browser"


def found(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    chosen = env.get("LB_CHROMIUM", "")
    if chosen and os.access(Path(chosen), os.X_OK):
        return True
    return have("chromium")


def ensure_installed() -> None:
    if found():
        return
    if not is_root():
        raise ServiceError("chromium is missing (run as root or: sudo apt-get install -y chromium)")
    log("installing Debian's chromium via apt-get...")
    apt_install(["chromium", "fonts-dejavu-core"], who=WHO, no_services=False)
    if not found():
        raise ServiceError("chromium still missing after install")
