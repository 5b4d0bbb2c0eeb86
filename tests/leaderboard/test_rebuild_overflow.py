"""A cumulative sum beyond the codec: live ingestion leaves the overflowing result off the board,
a rebuild leaves the player off (it cannot know which result arrived last) and reports them;
neither clamps, and a rebuild of an overflowing season completes."""

from __future__ import annotations

from datetime import timedelta

import pytest

from leaderboard import keys
from leaderboard.models import RebuildRun, ScoringRule
from leaderboard.services import PHASE_ACTIVATED, board_rebuild, board_reconcile
from tests.helpers import as_board, board_read, main_board_id, make_season
from tests.leaderboard import live
from tests.leaderboard.test_rebuild import _in_other_thread

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_player_whose_total_overflows_is_left_off_and_reported(board_redis):
    season = make_season(rule=ScoringRule.CUMULATIVE)
    top = as_board(season).codec.max_points
    at = season.starts_at + timedelta(hours=1)
    live.ingest(board_redis, season, player_id=1, points=top, at=at)
    live.ingest(board_redis, season, player_id=1, points=1, at=at)  # live ingestion leaves it off
    live.ingest(board_redis, season, player_id=2, points=7, at=at)
    key = keys.board(board_id=main_board_id(season.id))
    assert board_read(board_redis, key) == {
        1: as_board(season).codec.encode(points=top, elapsed_ticks=3600),
        2: as_board(season).codec.encode(points=7, elapsed_ticks=3600),
    }

    result = board_rebuild(board_id=main_board_id(season.id))

    assert result.overflowed == (1,)
    assert board_read(board_redis, key) == {
        2: as_board(season).codec.encode(points=7, elapsed_ticks=3600)
    }
    run = RebuildRun.objects.get()
    assert (run.status, run.members, run.overflowed_count) == ("succeeded", 1, 1)
    assert run.overflowed_players == [1]
    # Reconcile expects the board the rebuild makes: no drift, no endless rebuilds.
    reconciled = board_reconcile(board_id=main_board_id(season.id), sample_size=10)
    assert (reconciled.drift_found, reconciled.rebuilt) == (False, False)


def test_a_total_that_overflows_through_the_delta_is_left_off_and_reported(board_redis):
    season = make_season(rule=ScoringRule.CUMULATIVE)
    top = as_board(season).codec.max_points
    at = season.starts_at + timedelta(hours=1)
    live.ingest(board_redis, season, player_id=1, points=top - 5, at=at)
    live.ingest(board_redis, season, player_id=2, points=7, at=at)

    def on_phase(name):
        if name == PHASE_ACTIVATED:
            # A result that overflows on the live board is left off it and never reaches the
            # delta; one that fits a drifted live board (the player missing there: what the
            # rebuild repairs) reaches the delta and overflows the snapshot's sum at the merge.
            board_redis.zrem(keys.board(board_id=main_board_id(season.id)), "1")
            _in_other_thread(
                lambda: live.ingest(board_redis, season, player_id=1, points=10, at=at)
            )

    result = board_rebuild(board_id=main_board_id(season.id), on_phase=on_phase)

    assert result.overflowed == (1,)
    assert board_read(board_redis, keys.board(board_id=main_board_id(season.id))) == {
        2: as_board(season).codec.encode(points=7, elapsed_ticks=3600)
    }
    assert RebuildRun.objects.get().overflowed_players == [1]
