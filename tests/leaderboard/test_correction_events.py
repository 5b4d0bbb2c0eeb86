"""Corrections emit rank_changed for the player they move: a void, a ban, an unban, once per
correction however often its task runs, and with the standing from before the correction even
when a first try died after the rebuild; published to the rank-events topic."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from leaderboard import keys
from leaderboard.models import Board, ScoringRule
from leaderboard.selectors.boards import BoardRef
from leaderboard.services import (
    Correction,
    CorrectionEventsPending,
    board_rebuild,
    boards_correct,
    correction_events_begin,
    match_result_void,
    match_results_void,
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


def _correct(correction: Correction) -> None:
    """Its task: boards_correct as the admin queues it."""
    boards_correct(
        season_id=correction.season_id,
        days=correction.days,
        board_ids=correction.board_ids,
        subjects=correction.subjects,
    )


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
    _correct(correction)
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
    _correct(correction)
    assert len(_events(events_topic)) == 1


def test_a_retry_after_a_crash_past_the_rebuild_keeps_the_standing_before(
    board_redis, events_topic
) -> None:
    _season, board, results = _board_with_four(board_redis)
    correction = match_result_void(result_id=results[1].pk, reason="desync")
    # A first try kept the standings, rebuilt the board, and died before emitting.
    ref = BoardRef.from_model(board)
    correction_events_begin(board=ref, subjects=correction.subjects)
    board_rebuild(board_id=board.id, reason="correction")
    # Its retry: the board no longer shows player 1's old rank, the kept standing does.
    _correct(correction)
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
    _season, board, results = _board_with_four(board_redis)
    Board.objects.filter(pk=board.pk).update(rank_events=False)
    correction = match_result_void(result_id=results[2].pk, reason="desync")
    _correct(correction)
    assert _events(events_topic) == []


def test_a_correction_another_rebuild_applied_first_still_emits(board_redis, events_topic) -> None:
    """Each correction kept its players' standings only when its task ran: a rebuild that had
    applied it already (another correction's, the reconcile) left nothing to compare."""
    season, _, _ = _board_with_four(board_redis)
    first = player_ban(season_id=season.id, player_id=2, reason="aimbot")
    second = player_ban(season_id=season.id, player_id=3, reason="aimbot")
    # The first ban's task runs first: its rebuild takes both players off.
    boards_correct(season_id=season.id, days=first.days, subjects=first.subjects)
    boards_correct(season_id=season.id, days=second.days, subjects=second.subjects)
    moved = {e["playerId"]: (e["rank"], e["previousRank"]) for e in _events(events_topic)}
    assert moved == {2: (None, 2), 3: (None, 3)}


def test_several_results_of_a_player_voided_at_once_emit_one_event(
    board_redis, events_topic
) -> None:
    season, board, results = _board_with_four(board_redis)
    again = live.ingest(
        board_redis, season, player_id=1, points=50, at=results[1].achieved_at + timedelta(hours=1)
    )
    (correction,) = match_results_void(result_ids=[again.pk, results[1].pk], reason="desync")
    assert correction.voided == 2
    _correct(correction)
    (event,) = _events(events_topic)
    assert event["eventId"] == f"void:{results[1].pk}:{board.id}:rank_changed:1"
    assert (event["rank"], event["previousRank"]) == (None, 1)


def test_events_kafka_did_not_take_are_sent_by_the_close_out_before_it_drops_the_keys(
    board_redis, events_topic, settings, drained_match_results
) -> None:
    """A correction whose events Kafka did not take left them in the corrections outbox, where
    only a later correction of the board would send them: the close-out deleted them."""
    from closeout.services import season_close

    season, board, results = _board_with_four(board_redis)
    correction = match_result_void(result_id=results[2].pk, reason="desync")
    reachable = settings.KAFKA_BOOTSTRAP_SERVERS
    settings.KAFKA_BOOTSTRAP_SERVERS = ["127.0.0.1:1"]
    with pytest.raises(CorrectionEventsPending) as pending:
        _correct(correction)
    assert pending.value.board_ids == (board.id,)
    settings.KAFKA_BOOTSTRAP_SERVERS = reachable
    assert _events(events_topic) == []
    assert board_redis.xlen(keys.rank_events_corrections_outbox(board_id=board.id)) == 1
    assert season_close(season_id=season.id, grace_seconds=0).closed
    (event,) = [e for e in _events(events_topic) if e["type"] == "rank_changed"]
    assert (event["playerId"], event["rank"], event["previousRank"]) == (2, None, 2)
    assert list(board_redis.scan_iter(match=keys.board_pattern(board_id=board.id))) == []
