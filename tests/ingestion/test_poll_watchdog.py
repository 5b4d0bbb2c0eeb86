"""A poll that never returns ends the consumer (here: on_stall); polls that return never do."""

from __future__ import annotations

import subprocess
import sys
import threading

from ingestion.poll_watchdog import PollWatchdog
from tests.helpers import wait_until


def test_a_poll_that_outlasts_the_limit_is_reported_once_with_how_long_it_hung() -> None:
    stalls: list[float] = []
    watchdog = PollWatchdog(limit_seconds=0.2, on_stall=stalls.append, check_every_seconds=0.02)
    release = threading.Event()
    watchdog.start()

    def stuck_poll() -> None:
        with watchdog.polling():
            release.wait(10)  # a client that does not come back

    poller = threading.Thread(target=stuck_poll)
    poller.start()
    try:
        wait_until(lambda: bool(stalls), timeout=5)
    finally:
        release.set()
        poller.join()
        watchdog.stop()
    [stalled] = stalls
    assert stalled > 0.2


def test_polls_that_return_within_the_limit_never_fire_it() -> None:
    stalls: list[float] = []
    watchdog = PollWatchdog(limit_seconds=0.2, on_stall=stalls.append, check_every_seconds=0.01)
    watchdog.start()
    try:
        for _ in range(40):
            with watchdog.polling():
                threading.Event().wait(0.01)  # a poll's own wait, well under the limit
        # Between polls (handling a batch, however long) nothing is watched.
        threading.Event().wait(0.4)
    finally:
        watchdog.stop()
    assert stalls == []


def test_a_limit_of_zero_is_off() -> None:
    watchdog = PollWatchdog(limit_seconds=0, on_stall=lambda s: None)
    watchdog.start()
    assert watchdog._thread is None
    watchdog.stop()


def test_by_default_a_stuck_poll_ends_the_process_with_status_70_and_says_why() -> None:
    program = (
        "import logging, threading\n"
        "logging.basicConfig()\n"
        "from ingestion.poll_watchdog import PollWatchdog\n"
        "w = PollWatchdog(limit_seconds=0.2, check_every_seconds=0.02)\n"
        "w.start()\n"
        "with w.polling():\n"
        "    threading.Event().wait(30)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 70
    assert "Kafka poll() has not returned" in done.stderr
