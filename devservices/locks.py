"""File locks: one start/stop at a time per set of ports. Several worktrees (each with its own
state folder, or sharing one) run the suite in parallel against the same ports and must not race
to start the same service twice. The file names depend on the ports alone (in TMPDIR), so every
checkout's runs on the same ports exclude each other.

The cluster nodes have their own lock: killing and restarting one node for a failover test must
not wait for another checkout's start of the shared services. Both are flock(2) locks on
descriptors Python opens close-on-exec, so no daemon started under them keeps them held.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from devservices.errors import ServiceError, log

WAIT_SECONDS = 900.0


@contextmanager
def held(path: Path, what: str, wait: float = WAIT_SECONDS) -> Iterator[None]:
    """Hold ``path`` exclusively; wait up to ``wait`` seconds for another holder, saying so."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o666)
    except OSError:
        yield  # an unwritable lock folder: run unlocked, as flock-less machines did
        return
    try:
        if not _try(fd):
            log(f"waiting for another run on {what} (lock {path})...")
            deadline = time.monotonic() + wait
            while not _try(fd):
                if time.monotonic() >= deadline:
                    raise ServiceError(f"another run still holds {path} after {wait / 60:.0f} min")
                time.sleep(0.5)
        yield
    finally:
        os.close(fd)


def _try(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
