"""The reconcile's reads of a board's players in PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from leaderboard.models import MatchResult, PlayerBan, ScoringRule
from leaderboard.selectors.members import board_players_sample
from tests.helpers import as_board, make_result, make_season

pytestmark = pytest.mark.django_db


def test_the_reconcile_sample_draws_every_counted_player_and_nothing_else():
    season = make_season(rule=ScoringRule.BEST)
    other = make_season(rule=ScoringRule.BEST)
    at = season.starts_at + timedelta(hours=1)
    for player in range(1, 6):
        make_result(season=season, player_id=player, points=10, achieved_at=at)
    # Not counted: a voided result, a banned player; another season's player beyond the range.
    voided = make_result(season=season, player_id=7, points=10, achieved_at=at)
    MatchResult.objects.filter(pk=voided.pk).update(voided_at=timezone.now())
    make_result(season=season, player_id=8, points=10, achieved_at=at)
    PlayerBan.objects.create(season=season, player_id=8, reason="test")
    make_result(season=other, player_id=6, points=10, achieved_at=other.starts_at)

    # 800 draws over ids 1..8: each of the five players is missed with probability < 1e-46;
    # all 12 draws of size 3 land past player 5 with probability (3/8)^12 < 1e-5.
    assert sorted(board_players_sample(board=as_board(season), size=200)) == [1, 2, 3, 4, 5]
    # Up to the size: draws past the last counted player, or landing on the same one, add none.
    small = board_players_sample(board=as_board(season), size=3)
    assert 1 <= len(small) <= 3
    assert set(small) <= {1, 2, 3, 4, 5}
    assert (
        board_players_sample(board=as_board(season), size=5, day=at.date() + timedelta(days=1))
        == []
    )
    empty = make_season(rule=ScoringRule.BEST)
    assert board_players_sample(board=as_board(empty), size=5) == []


def test_the_reconcile_sample_does_not_sort_the_season():
    """At 10M players an ORDER BY random() over every player read and sorted the season."""
    from django.db import connection

    season = make_season(rule=ScoringRule.BEST)
    make_result(season=season, player_id=1, points=10, achieved_at=season.starts_at)
    board = as_board(season)
    with CaptureQueriesContext(connection) as queries:
        board_players_sample(board=board, size=5)
    (query,) = queries.captured_queries
    assert "random()" in query["sql"]
    assert "ORDER BY random()" not in query["sql"]
