"""How the package reports: ``[services] ...`` lines on stderr, and one exception for a failure
the command line turns into ``[services] ERROR: ...`` and exit status 1."""

from __future__ import annotations

import sys
from pathlib import Path

PREFIX = "[services]"


class ServiceError(Exception):
    """A service cannot be started, stopped or checked; the message says why and what to do."""


def log(message: str) -> None:
    # One write per line: the Kafka nodes are stopped from parallel threads.
    sys.stderr.write(f"{PREFIX} {message}\n")
    sys.stderr.flush()


def show_log_tail(path: Path, lines: int = 25) -> None:
    """The end of a service's log on stderr, so a failure shows its cause without a hunt."""
    if not path.is_file():
        return
    try:
        tail = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return
    print(f"{PREFIX} ---- last lines of {path} ----", file=sys.stderr)
    for line in tail:
        print(line, file=sys.stderr)
    print(f"{PREFIX} ----", file=sys.stderr, flush=True)
