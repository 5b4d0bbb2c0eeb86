"""The filters that keep kafka-python's reconnect loop and Celery's every-second task from
flooding the log."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from leaderboard_project.logfilters import QuietTasksFilter, RepeatedRecordsFilter


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _record(name: str, msg: str, *args: object, level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, args or None, None)


@pytest.fixture
def clock() -> _Clock:
    return _Clock()


def test_one_record_per_kind_and_interval_then_the_count_of_those_dropped(clock) -> None:
    limit = RepeatedRecordsFilter(loggers=["kafka"], interval_seconds=60, clock=clock)
    passed = []
    for n in range(500):
        clock.now = n * 0.1  # 50 s of a reconnect loop, ten failures a second
        record = _record("kafka.net.connection", "node %s: Connection lost", n % 3)
        if limit.filter(record):
            passed.append(record.getMessage())
    assert passed == ["node 0: Connection lost"]

    clock.now = 61
    record = _record("kafka.net.connection", "node %s: Connection lost", 2)
    assert limit.filter(record)
    assert record.getMessage() == (
        "node 2: Connection lost [499 more like this dropped since the previous one]"
    )


def test_kinds_are_apart_and_other_loggers_untouched(clock) -> None:
    limit = RepeatedRecordsFilter(loggers=["kafka"], interval_seconds=60, clock=clock)
    assert limit.filter(_record("kafka.cluster", "No node available"))
    assert limit.filter(_record("kafka.cluster", "No node available", level=logging.WARNING))
    assert limit.filter(_record("kafka.coordinator", "No node available"))
    assert limit.filter(_record("kafka.cluster", "Another message"))
    assert not limit.filter(_record("kafka.cluster", "No node available"))
    for _ in range(3):
        # The consumer's own lines, and a logger that only starts with "kafka", always pass.
        assert limit.filter(_record("ingestion.consumer", "waiting for Kafka"))
        assert limit.filter(_record("kafkaesque", "No node available"))


def test_a_percent_sign_in_the_message_survives_the_count(clock) -> None:
    limit = RepeatedRecordsFilter(interval_seconds=1, clock=clock)
    assert limit.filter(_record("kafka", "%s at 100%%", "load"))
    assert not limit.filter(_record("kafka", "%s at 100%%", "load"))
    clock.now = 2
    record = _record("kafka", "%s at 100%%", "load")
    assert limit.filter(record)
    assert logging.Formatter("%(message)s").format(record) == (
        "load at 100% [1 more like this dropped since the previous one]"
    )


def test_memory_stays_bounded(clock) -> None:
    limit = RepeatedRecordsFilter(interval_seconds=60, clock=clock)
    for n in range(RepeatedRecordsFilter.MAX_KINDS * 3):
        limit.filter(_record("kafka", f"message {n}"))
    assert len(limit._kinds) <= RepeatedRecordsFilter.MAX_KINDS


def test_the_settings_put_it_on_the_root_handler() -> None:
    assert any(
        isinstance(f, RepeatedRecordsFilter)
        for handler in logging.getLogger().handlers
        for f in handler.filters
    )


# --- Celery's per-run lines for the every-second task -------------------------------------------

SNAPSHOT_TASK = "leaderboard.tasks.refresh_top_snapshots"


class _Collect(logging.Handler):
    def __init__(self, tasks: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.addFilter(QuietTasksFilter(tasks=tasks))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def collected() -> Iterator[_Collect]:
    """Celery's own loggers, as the worker and beat call them, into a handler with the filter."""
    handler = _Collect([SNAPSHOT_TASK])
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield handler
    root.removeHandler(handler)
    root.setLevel(level)


def _task_lines(name: str) -> None:
    from celery.app import trace
    from celery.worker import strategy

    logging.getLogger("celery.beat").info(
        "Scheduler: Sending due task %s (%s)", f"entry for {name}", name
    )
    strategy.logger.info(
        trace.LOG_RECEIVED, {"id": "1", "name": name, "args": "()", "kwargs": "{}"}
    )
    trace.info(trace.LOG_SUCCESS, {"id": "1", "name": name, "runtime": 0.01, "return_value": 3})


def test_the_snapshot_tasks_routine_lines_are_dropped(collected) -> None:
    _task_lines(SNAPSHOT_TASK)
    assert collected.lines == []


def test_other_tasks_still_log(collected) -> None:
    _task_lines("seasons.tasks.seasons_close_due_task")
    assert collected.lines == [
        "Scheduler: Sending due task entry for seasons.tasks.seasons_close_due_task "
        "(seasons.tasks.seasons_close_due_task)",
        "Task seasons.tasks.seasons_close_due_task[1] received",
        "Task seasons.tasks.seasons_close_due_task[1] succeeded in 0.01s: 3",
    ]


def test_a_failure_of_the_snapshot_task_still_logs(collected) -> None:
    from celery.app import trace

    trace.logger.error(
        trace.LOG_FAILURE,
        {"id": "1", "name": SNAPSHOT_TASK, "description": "raised unexpected", "exc": "boom"},
    )
    assert collected.lines == [f"Task {SNAPSHOT_TASK}[1] raised unexpected: boom"]


def test_the_settings_quiet_the_snapshot_task_on_the_root_handler(settings) -> None:
    assert settings.LOG_QUIET_TASKS == [SNAPSHOT_TASK]
    quiet = [
        f
        for handler in logging.getLogger().handlers
        for f in handler.filters
        if isinstance(f, QuietTasksFilter)
    ]
    assert quiet
    beat_line = _record("celery.beat", "Sending %s (%s)", "x", SNAPSHOT_TASK, level=logging.INFO)
    assert quiet[0].filter(beat_line) is False
