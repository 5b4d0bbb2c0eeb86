"""The filters that keep kafka-python's reconnect loop and Celery's lines about the routine
periodic tasks from flooding the log; the periodic tasks themselves are silent when idle."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import leaderboard_project.settings
from leaderboard_project.logfilters import QuietTasksFilter, RepeatedRecordsFilter
from leaderboard_project.schedules import PERIODIC_TASKS


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


# --- Celery's per-run lines for the routine periodic tasks -------------------------------------

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


# --- Routine periodic tasks: silent when there is nothing to do ----------------------------------


class _Console(logging.Handler):
    """What the console handler of settings.LOGGING lets through: the same filters."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        # The root's handlers also hold pytest's own; settings.LOGGING's is the one filtering.
        [console] = [
            handler
            for handler in logging.getLogger().handlers
            if any(isinstance(f, QuietTasksFilter) for f in handler.filters)
        ]
        for each in console.filters:
            self.addFilter(each)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def lines(self, *, level: int = logging.INFO) -> list[str]:
        return [
            f"{r.levelname} {r.name} {r.getMessage()}" for r in self.records if r.levelno >= level
        ]


@pytest.fixture
def console() -> Iterator[_Console]:
    handler = _Console()
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)  # as LOG_LEVEL's default, whatever the test run set
    yield handler
    root.removeHandler(handler)
    root.setLevel(level)


def test_the_settings_quiet_every_periodic_task(settings, console) -> None:
    assert [spec.task for spec in PERIODIC_TASKS] == settings.LOG_QUIET_TASKS
    for spec in PERIODIC_TASKS:
        _task_lines(spec.task)
    assert console.lines() == []
    # An on-demand task (queued by the close-out sweep, an admin action) keeps its lines.
    _task_lines("closeout.tasks.season_close_task")
    assert len(console.lines()) == 3


def _run_periodic_tasks() -> None:
    """Every registered periodic task once, traced as the worker traces it (its "succeeded"
    line included)."""
    from django.utils.module_loading import import_string

    for spec in PERIODIC_TASKS:
        outcome = import_string(spec.task).apply(kwargs=spec.kwargs)
        assert outcome.successful(), (spec.task, outcome.traceback)


# A rebuild reads PostgreSQL from a thread of its own: the rows must be committed.
@pytest.mark.django_db(transaction=True)
def test_idle_periodic_tasks_log_nothing_at_info(console, drained_match_results) -> None:
    from tests.helpers import make_live_season, make_result

    season = make_live_season()
    make_result(season=season, player_id=1, points=10)
    # The first runs have work (the boards are not in Redis yet, this Redis was never seen
    # before) and say so; the next ones have none.
    _run_periodic_tasks()
    assert console.lines(level=logging.WARNING)
    console.records.clear()

    _run_periodic_tasks()
    for spec in PERIODIC_TASKS:
        _task_lines(spec.task)  # beat's and the worker's lines about the same runs
    assert console.lines() == []


@pytest.mark.django_db(transaction=True)
def test_a_periodic_task_that_did_something_says_so(console, drained_match_results) -> None:
    from leaderboard import keys
    from leaderboard.redis import get_board_redis
    from leaderboard.tasks import boards_recover_task
    from tests.helpers import main_board_id, make_live_season, make_result

    season = make_live_season()
    make_result(season=season, player_id=1, points=10)
    boards_recover_task.apply()
    console.records.clear()

    board_id = main_board_id(season.id)
    get_board_redis().delete(keys.board_intact(board_id=board_id))
    boards_recover_task.apply()
    [line] = console.lines()
    assert line.startswith(
        f"WARNING leaderboard.services.recovery recovered board {board_id} (intact key missing)"
    )


@pytest.mark.parametrize(
    ("value", "quiet"),
    [
        ("", [spec.task for spec in PERIODIC_TASKS]),  # empty is unset: the default
        ("none", []),
        ("a.task, another.task", ["a.task", "another.task"]),
    ],
)
def test_log_quiet_tasks_from_the_environment(monkeypatch, value, quiet) -> None:
    monkeypatch.setenv("DJANGO_DEBUG", "true")
    monkeypatch.setenv("LOG_QUIET_TASKS", value)
    # A fresh run of the settings module's code, leaving the loaded module alone.
    path = Path(leaderboard_project.settings.__file__)
    fresh: dict[str, Any] = {"__name__": "fresh_settings", "__package__": "leaderboard_project"}
    fresh["__file__"] = str(path)
    exec(compile(path.read_text(), str(path), "exec"), fresh)  # noqa: S102 - our own settings
    assert fresh["LOG_QUIET_TASKS"] == quiet
    assert fresh["LOGGING"]["filters"]["quiet_tasks"]["tasks"] == quiet
