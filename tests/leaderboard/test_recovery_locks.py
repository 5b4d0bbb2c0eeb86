"""A recovery's locks are released by their holder only: a run that outlived its lock leaves
alone the lock the next run took meanwhile (and a lock outlasts the task's time limit)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from leaderboard import keys
from leaderboard.models import MatchResult
from leaderboard.selectors.boards import BoardRef
from leaderboard.services import board_recover, recovery
from leaderboard.tasks import boards_recover_task
from tests.helpers import board_read, expected_board, main_board, make_live_season

pytestmark = pytest.mark.django_db(transaction=True)


def _board_with_three_results(now: datetime) -> BoardRef:
    """A live season's main board with three players' stored results, none in Redis yet."""
    season = make_live_season()
    ref = main_board(season.id)
    for player in (1, 2, 3):
        MatchResult.objects.create(
            season_id=season.id, board_id=ref.id, match_id=uuid.uuid4(), player_id=player,
            points=10 * player, achieved_at=now - timedelta(hours=1), kafka_partition=0,
            kafka_offset=player,
        )  # fmt: skip
    return ref


def test_a_recovery_that_outlived_its_lock_leaves_the_next_runs_lock(board_redis, monkeypatch):
    now = timezone.now()
    ref = _board_with_three_results(now)
    lock = keys.board_recovering(board_id=ref.id)
    rebuild = recovery.board_rebuild

    def rebuild_while_the_lock_moves_on(**kwargs: Any) -> Any:
        # This run's lock expired mid-way and the next run took it.
        board_redis.set(lock, "the next run's token", ex=60)
        return rebuild(**kwargs)

    monkeypatch.setattr(recovery, "board_rebuild", rebuild_while_the_lock_moves_on)
    board_redis.delete(keys.board_intact(board_id=ref.id))
    # The lock's holder marks the board once its own run ends; this one leaves it unmarked.
    assert board_recover(board=ref, reason="test", now=now) is None
    assert board_redis.get(lock) == b"the next run's token"
    assert not board_redis.exists(keys.board_intact(board_id=ref.id))
    assert board_read(board_redis, keys.board(board_id=ref.id)) == expected_board(
        ref, MatchResult.objects.all()
    )


def test_a_recovery_lock_outlasts_the_recovery_tasks_time_limit() -> None:
    limit = boards_recover_task.time_limit
    assert limit is not None
    assert limit < recovery.RECOVERY_LOCK_SECONDS


def test_a_board_lost_again_during_its_recovery_is_not_marked_intact_and_recovers_next(
    board_redis, monkeypatch
):
    """A loss mid-recovery (FLUSHALL, the board's keys deleted) takes what the run rebuilt
    before it, and the run's lock with it: the run does not mark the board intact (it would be
    served as truth, wrong, with nothing left to repair it), and the next look recovers it."""
    now = timezone.now()
    ref = _board_with_three_results(now)
    board_redis.delete(keys.board_intact(board_id=ref.id))
    rebuild = recovery.board_rebuild
    lost: list[int] = []

    def rebuild_then_lose_the_board(**kwargs: Any) -> Any:
        result = rebuild(**kwargs)
        if not lost:  # the season-long board rebuilt, then every key of the board goes
            found = list(board_redis.scan_iter(match=keys.board_pattern(board_id=ref.id)))
            lost.append(board_redis.delete(*found))
        return result

    monkeypatch.setattr(recovery, "board_rebuild", rebuild_then_lose_the_board)
    assert board_recover(board=ref, reason="test", now=now) is None
    assert lost
    assert lost[0] > 0
    assert not board_redis.exists(keys.board_intact(board_id=ref.id))
    assert not board_redis.exists(keys.board(board_id=ref.id))
    monkeypatch.setattr(recovery, "board_rebuild", rebuild)
    boards_recover_task()
    assert board_redis.exists(keys.board_intact(board_id=ref.id))
    assert board_read(board_redis, keys.board(board_id=ref.id)) == expected_board(
        ref, MatchResult.objects.all()
    )
