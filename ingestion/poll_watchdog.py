"""A poll that never returns ends the consumer process, so that its supervisor starts it again.

kafka-python 3.0.12 can block inside ``KafkaConsumer.poll()`` past its ``timeout_ms`` and never
come back: its calling thread waits without a timeout for the client's I/O thread
(``NetworkSelector.run``: ``event.wait()``; the same wait in ``commit()`` is
dpkp/kafka-python#3121). Seen here once when a broker of the local cluster was killed. Such a
consumer holds its partitions, applies nothing and logs nothing, so no other member takes over.

Ending the process is safe: what it stored and applied stays, what it did not commit is
delivered again and the exactly-once rule absorbs it. The limit must exceed the longest poll
that is not stuck: a poll that joins a group rebalance can block up to the group's
max.poll.interval.ms (kafka-python's default: 300 s).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

logger = logging.getLogger(__name__)

# The exit status of a process ended by the watchdog (EX_SOFTWARE).
STALLED_EXIT_STATUS = 70


def _exit_process(stalled_seconds: float) -> None:
    logger.critical(
        "Kafka poll() has not returned for %.0f s (a stuck client): ending the process so that "
        "its supervisor restarts it; uncommitted batches are delivered again",
        stalled_seconds,
    )
    logging.shutdown()
    os._exit(STALLED_EXIT_STATUS)


class PollWatchdog:
    """Watches one thread's ``poll()`` calls (``with watchdog.polling(): consumer.poll(...)``)
    and calls ``on_stall`` (default: end the process) once one outlasts ``limit_seconds``."""

    def __init__(
        self,
        *,
        limit_seconds: float,
        on_stall: Callable[[float], None] = _exit_process,
        check_every_seconds: float = 1.0,
    ) -> None:
        self._limit = limit_seconds
        self._on_stall = on_stall
        self._check_every = check_every_seconds
        self._poll_started: float | None = None
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._limit <= 0 or (self._thread is not None and self._thread.is_alive()):
            return  # 0: off
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="poll-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @contextmanager
    def polling(self) -> Iterator[None]:
        self._poll_started = time.monotonic()
        try:
            yield
        finally:
            self._poll_started = None

    def _watch(self) -> None:
        while not self._stopped.wait(self._check_every):
            started = self._poll_started
            if started is None:
                continue
            stalled = time.monotonic() - started
            if stalled > self._limit:
                self._on_stall(stalled)
                return
