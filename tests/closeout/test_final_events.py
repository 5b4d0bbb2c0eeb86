"""season_final rank events at close-out: each player of the final standings with rank and
reward, once per board (a rerun sends nothing new), sent again by the sweep when Kafka was away,
and none from a board without events."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from closeout.models import FinalEventsSent
from closeout.services import (
    reward_tier_create,
    season_close,
    season_final_events_publish,
    seasons_final_events_due,
)
from leaderboard.models import Board
from seasons.models import Season, SeasonStatus
from tests.factories import MatchResultFactory, SeasonFactory, board_factory
from tests.ingestion.topic_reader import topic_read

START = datetime(2026, 10, 1, tzinfo=UTC)
END = START + timedelta(days=30)
AFTER = END + timedelta(hours=1)

pytestmark = [pytest.mark.usefixtures("drained_match_results"), pytest.mark.django_db]


@pytest.fixture
def events_topic(settings, kafka_topic_factory) -> str:
    settings.KAFKA_RANK_EVENTS_TOPIC = kafka_topic_factory("rank-events")
    return settings.KAFKA_RANK_EVENTS_TOPIC


def _events(topic: str) -> list[dict[str, Any]]:
    return [json.loads(r.value) for r in topic_read(topic)]


@pytest.fixture
def season() -> Season:
    season = SeasonFactory.create(starts_at=START, ends_at=END, status=SeasonStatus.ACTIVE)
    quiet = board_factory(season, "quiet", rank_events=False)
    for player, points in ((1, 900), (2, 700), (3, 500)):
        at = START + timedelta(hours=player)
        MatchResultFactory.create(season=season, player_id=player, points=points, achieved_at=at)
        MatchResultFactory.create(on_board=quiet, player_id=player, points=points, achieved_at=at)
    reward_tier_create(season_id=season.id, rank_from=1, rank_to=1, reward_name="crown")
    reward_tier_create(season_id=season.id, rank_from=2, rank_to=2, reward_name="gems", quantity=50)
    return season


def test_close_out_sends_each_standing_with_its_reward_once(season, events_topic) -> None:
    assert season_close(season_id=season.id, now=AFTER, grace_seconds=0).closed
    main = Board.objects.get(season=season, slug="main")
    season.refresh_from_db()
    at = season.closed_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    expected = [
        {
            "eventId": f"final:{main.id}:season_final:{player}",
            "type": "season_final",
            "seasonId": season.id,
            "board": "main",
            "playerId": player,
            "rank": rank,
            "previousRank": None,
            "points": points,
            "previousPoints": None,
            "matchId": None,
            "otherPlayerId": None,
            "at": at,
            "reward": reward,
        }
        for rank, player, points, reward in (
            (1, 1, 900, {"name": "crown", "quantity": 1}),
            (2, 2, 700, {"name": "gems", "quantity": 50}),
            (3, 3, 500, None),
        )
    ]
    assert _events(events_topic) == expected  # the quiet board sends none
    assert FinalEventsSent.objects.get(board=main).events == 3
    # A rerun of the close-out, the sweep: nothing more.
    season_close(season_id=season.id, now=AFTER, grace_seconds=0)
    assert seasons_final_events_due() == []
    assert len(_events(events_topic)) == 3


class _Away:
    def publish(self, *, messages) -> None:
        raise ConnectionError("Kafka is away")


def test_the_sweep_sends_what_kafka_could_not_take(season, events_topic, monkeypatch) -> None:
    from closeout.services import final_events

    monkeypatch.setattr(final_events, "rank_event_sink", lambda: _Away())
    assert season_close(season_id=season.id, now=AFTER, grace_seconds=0).closed
    assert _events(events_topic) == []
    assert seasons_final_events_due() == [season.id]
    monkeypatch.undo()
    assert season_final_events_publish(season_id=season.id) == 3
    assert [e["playerId"] for e in _events(events_topic)] == [1, 2, 3]
    assert seasons_final_events_due() == []
