"""The rebuild and correction tasks staff queue ride out a Redis or PostgreSQL blip: retried,
not failed for good (redis-py's connection errors are not Python's ConnectionError)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from django.db import OperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from leaderboard import tasks


@pytest.mark.parametrize(
    "outage", [RedisConnectionError("refused"), RedisTimeoutError("slow"), OperationalError("gone")]
)
def test_a_rebuild_task_is_retried_through_an_outage(monkeypatch, outage) -> None:
    calls: list[int] = []

    def rebuild(**kwargs: Any) -> SimpleNamespace:
        calls.append(kwargs["board_id"])
        if len(calls) < 3:
            raise outage
        return SimpleNamespace(members=7)

    monkeypatch.setattr(tasks, "board_rebuild", rebuild)
    result = tasks.board_rebuild_task.apply(kwargs={"board_id": 5, "day": "2026-10-01"})
    assert result.successful(), result.traceback
    assert result.get() == "board 5 day 2026-10-01: 7 players"
    assert calls == [5, 5, 5]
