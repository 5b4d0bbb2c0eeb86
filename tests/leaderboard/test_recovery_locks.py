"""A recovery's locks are released by their holder only: a run that outlived its lock leaves
alone the lock the next run took meanwhile (and a lock outlasts the task's time limit)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from leaderboard import keys
from leaderboard.models import MatchResult
from leaderboard.services import board_recover, recovery
from leaderboard.tasks import boards_recover_task
from tests.helpers import board_read, expected_board, main_board, make_live_season

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_recovery_that_outlived_its_lock_leaves_the_next_runs_lock(board_redis, monkeypatch):
    now = timezone.now()
    season = make_live_season()
    ref = main_board(season.id)
    for player in (1, 2, 3):
        MatchResult.objects.create(
            season_id=season.id, board_id=ref.id, match_id=uuid.uuid4(), player_id=player,
            points=10 * player, achieved_at=now - timedelta(hours=1), kafka_partition=0,
            kafka_offset=player,
        )  # fmt: skip
    lock = keys.board_recovering(board_id=ref.id)
    rebuild = recovery.board_rebuild

    def rebuild_while_the_lock_moves_on(**kwargs: Any) -> Any:
        # This run's lock expired mid-way and the next run took it.
        board_redis.set(lock, "the next run's token", ex=60)
        return rebuild(**kwargs)

    monkeypatch.setattr(recovery, "board_rebuild", rebuild_while_the_lock_moves_on)
    assert board_recover(board=ref, reason="test", now=now) is not None
    assert board_redis.get(lock) == b"the next run's token"
    assert board_read(board_redis, keys.board(board_id=ref.id)) == expected_board(
        ref, MatchResult.objects.all()
    )


def test_a_recovery_lock_outlasts_the_recovery_tasks_time_limit() -> None:
    limit = boards_recover_task.time_limit
    assert limit is not None
    assert limit < recovery.RECOVERY_LOCK_SECONDS
