"""Corrections emit rank_changed for the player they move: a void, a ban, an unban, once per
correction however often its task runs, and with the standing from before the correction even
when a first try died after the rebuild; published to the rank-events topic."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from leaderboard.models import Board, ScoringRule
from leaderboard.selectors.boards import BoardRef
from leaderboard.services import (
    board_rebuild,
    boards_correct,
    correction_events_begin,
    match_result_void,
    player_ban,
    player_unban,
)
from seasons.models import SeasonStatus
from tests.helpers import make_season
from tests.ingestion.topic_reader import topic_read
from tests.leaderboard import live

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def events_topic(settings, kafka_topic_factory) -> str:
    settings.KAFKA_RANK_EVENTS_TOPIC = kafka_topic_factory("rank-events")
    return settings.KAFKA_RANK_EVENTS_TOPIC


def _events(topic: str) -> list[dict[str, Any]]:
    return [json.loads(r.value) for r in topic_read(topic)]


def _board_with_four(board_redis) -> tuple[Any, Board, dict[int, Any]]:
    """Players 1..4 with 90, 40, 30, 10 points (ranks 1..4), one result each."""
    season = make_season(rule=ScoringRule.BEST, status=SeasonStatus.ACTIVE)
    at = season.starts_at + timedelta(hours=1)
    results = {
        player: live.ingest(board_redis, season, player_id=player, points=points, at=at)
        for player, points in ((1, 90), (2, 40), (3, 30), (4, 10))
    }
    return season, Board.objects.get(season=season, slug="main"), results


def test_a_void_emits_rank_changed_once(board_redis, events_topic) -> None:
    season, board, results = _board_with_four(board_redis)
    correction = match_result_void(result_id=results[2].pk, reason="desync")
    boards_correct(
        season_id=season.id,
        days=correction.days,
        board_ids=correction.board_ids,
        subjects=correction.subjects,
    )
    voided = results[2]
    voided.refresh_from_db()
    assert _events(events_topic) == [
        {
            "eventId": f"void:{voided.pk}:{board.id}:rank_changed:2",
            "type": "rank_changed",
            "seasonId": season.id,
            "board": "main",
            "playerId": 2,
            "rank": None,
            "previousRank": 2,
            "points": None,
            "previousPoints": 40,
            "matchId": str(voided.match_id),
            "otherPlayerId": None,
            "at": voided.voided_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
    ]
    # The task again (a retry after it finished): the event was emitted, nothing new.
    boards_correct(
        season_id=season.id,
        days=correction.days,
        board_ids=correction.board_ids,
        subjects=correction.subjects,
    )
    assert len(_events(events_topic)) == 1


def test_a_retry_after_a_crash_past_the_rebuild_keeps_the_standing_before(
    board_redis, events_topic
) -> None:
    season, board, results = _board_with_four(board_redis)
    correction = match_result_void(result_id=results[1].pk, reason="desync")
    # A first try kept the standings, rebuilt the board, and died before emitting.
    ref = BoardRef.from_model(board)
    correction_events_begin(board=ref, subjects=correction.subjects)
    board_rebuild(board_id=board.id, reason="correction")
    # Its retry: the board no longer shows player 1's old rank, the kept standing does.
    boards_correct(
        season_id=season.id,
        days=correction.days,
        board_ids=correction.board_ids,
        subjects=correction.subjects,
    )
    (event,) = _events(events_topic)
    assert (event["playerId"], event["rank"], event["previousRank"]) == (1, None, 1)
    assert event["previousPoints"] == 90


def test_a_ban_and_an_unban_each_emit_rank_changed(board_redis, events_topic) -> None:
    season, _, _ = _board_with_four(board_redis)
    ban = player_ban(season_id=season.id, player_id=3, reason="aimbot")
    boards_correct(season_id=season.id, days=ban.days, subjects=ban.subjects)
    lifted = player_unban(season_id=season.id, player_id=3)
    boards_correct(season_id=season.id, days=lifted.days, subjects=lifted.subjects)
    banned, unbanned = _events(events_topic)
    assert (banned["playerId"], banned["rank"], banned["previousRank"]) == (3, None, 3)
    assert banned["eventId"].startswith("ban:")
    assert (unbanned["playerId"], unbanned["rank"], unbanned["previousRank"]) == (3, 3, None)
    assert (unbanned["points"], unbanned["previousPoints"]) == (30, None)
    assert unbanned["eventId"].startswith(f"unban:{season.id}:3:")


def test_a_board_with_events_off_emits_nothing(board_redis, events_topic) -> None:
    season, board, results = _board_with_four(board_redis)
    Board.objects.filter(pk=board.pk).update(rank_events=False)
    correction = match_result_void(result_id=results[2].pk, reason="desync")
    boards_correct(
        season_id=season.id,
        days=correction.days,
        board_ids=correction.board_ids,
        subjects=correction.subjects,
    )
    assert _events(events_topic) == []
