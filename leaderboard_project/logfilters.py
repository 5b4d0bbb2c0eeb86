"""Logging filters.

RepeatedRecordsFilter: kafka-python logs every failed connection attempt, at ERROR or WARNING,
and retries every few hundred milliseconds: while a broker is away a consumer writes thousands
of identical lines a minute, burying its own "waiting for Kafka" line and filling disks. The
filter keeps the first line of each kind and then one per interval, saying how many it dropped.

QuietTasksFilter: Celery's per-run INFO lines for the routine periodic tasks, which run every
few seconds whether or not there is work.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping


class RepeatedRecordsFilter(logging.Filter):
    """Let through one record per (logger, level, message template) per interval.

    Only records of the loggers named in ``loggers`` (and their children) are limited. The
    template is the unformatted message, so "Connection to node 1 lost" and "... node 2 lost"
    logged as ``"... node %s lost"`` count as one kind. The first record after a quiet interval
    carries how many were dropped before it.
    """

    # Bounded memory: kinds are message templates (a few dozen in practice); past this many,
    # the oldest are forgotten.
    MAX_KINDS = 1000

    def __init__(
        self,
        loggers: Iterable[str] = ("kafka",),
        interval_seconds: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self._prefixes = tuple(loggers)
        self._interval = interval_seconds
        self._clock = clock
        self._lock = threading.Lock()
        # kind -> [when the last record went through, records dropped since]
        self._kinds: dict[tuple[str, int, str], list[float]] = {}

    def _limited(self, name: str) -> bool:
        return any(name == p or name.startswith(p + ".") for p in self._prefixes)

    def filter(self, record: logging.LogRecord) -> bool:
        if not self._limited(record.name):
            return True
        kind = (record.name, record.levelno, str(record.msg))
        now = self._clock()
        with self._lock:
            state = self._kinds.get(kind)
            if state is not None and now - state[0] < self._interval:
                state[1] += 1
                return False
            dropped = int(state[1]) if state is not None else 0
            self._kinds.pop(kind, None)
            if len(self._kinds) >= self.MAX_KINDS:
                del self._kinds[next(iter(self._kinds))]
            self._kinds[kind] = [now, 0]
        if dropped:
            # Appended after formatting (getMessage), so a '%' here cannot break the record.
            message = record.getMessage()
            record.msg = f"{message} [{dropped} more like this dropped since the previous one]"
            record.args = None
        return True


class QuietTasksFilter(logging.Filter):
    """Drop Celery's routine INFO lines about the tasks named in ``tasks``.

    Beat sends the top-list snapshot task every second and the recovery every five, and for
    each run beat and the worker log three lines that bury everything else. The lines dropped
    are beat's "Scheduler: Sending due task <entry> (<task>)" and the worker's "Task
    <task>[id] received" and "... succeeded in ..."; a warning or an error about the same task
    (a failure, a retry, an expired run) and every line about any other task still pass.
    """

    def __init__(self, tasks: Iterable[str] = ()) -> None:
        super().__init__()
        self._tasks = frozenset(tasks)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.INFO or not self._tasks:
            return True
        if not (record.name == "celery" or record.name.startswith("celery.")):
            return True
        args = record.args
        if isinstance(args, Mapping):
            # The worker: Celery formats "Task %(name)s[%(id)s] ..." from a dict.
            return args.get("name") not in self._tasks
        if isinstance(args, tuple):
            # Beat: "Scheduler: Sending due task %s (%s)" with the entry's name, then the task.
            return not any(isinstance(arg, str) and arg in self._tasks for arg in args)
        return True
