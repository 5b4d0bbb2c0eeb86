"""The filter that keeps kafka-python from flooding the log while a broker is away."""

from __future__ import annotations

import logging

import pytest

from leaderboard_project.logfilters import RepeatedRecordsFilter


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
