"""Results dated after now + INGEST_MAX_FUTURE_SKEW_SECONDS are refused by both entrances with
the code ``achieved_in_future``: dead-lettered by the consumer, a 400 item at the HTTP door."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from ingestion import schema
from ingestion.consumer import MatchResultConsumer
from ingestion.services import game_server_token_create
from leaderboard.models import MatchResult
from seasons.models import SeasonStatus
from tests.helpers import make_season

from .ingest_helpers import Result, consumer_options, publish
from .topic_reader import topic_read

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def live_season():
    """A season around now: only the clock check can refuse a result dated soon."""
    now = timezone.now().replace(microsecond=0)
    return make_season(
        status=SeasonStatus.ACTIVE,
        starts_at=now - timedelta(days=10),
        ends_at=now + timedelta(days=60),
    )


def test_the_schema_check():
    now = timezone.now()
    message = schema.message_validate(
        {
            "matchId": str(uuid.uuid4()),
            "playerId": 1,
            "seasonId": 1,
            "points": 1,
            "achievedAt": (now + timedelta(seconds=301)).isoformat(),
        }
    )
    schema.message_check_not_future(message, not_after=now + timedelta(seconds=301))
    with pytest.raises(schema.MessageRejected) as caught:
        schema.message_check_not_future(message, not_after=now + timedelta(seconds=300))
    assert caught.value.code == schema.ACHIEVED_IN_FUTURE == "achieved_in_future"
    assert caught.value.field == "achievedAt"
    assert "future" in caught.value.reason


def test_the_consumer_dead_letters_results_from_the_future(topic_and_dlq, live_season, settings):
    settings.INGEST_MAX_FUTURE_SKEW_SECONDS = 300
    topic, dlq = topic_and_dlq("ingest-future")
    now = timezone.now()
    result = lambda player, when: Result(uuid.uuid4(), player, live_season.id, 10, when)  # noqa: E731
    accepted = [
        result(1, now - timedelta(hours=1)),
        # A game server's clock a minute ahead is within the skew.
        result(2, now + timedelta(seconds=60)),
    ]
    refused = [
        result(3, now + timedelta(hours=1)),
        result(4, now + timedelta(days=30)),  # inside the season's window
    ]
    stream = [(r.key(), r.value()) for r in accepted] + [
        (f"future-{n}".encode(), r.value()) for n, r in enumerate(refused)
    ]
    publish(topic, stream)

    totals = MatchResultConsumer(consumer_options(topic=topic, dead_letter_topic=dlq)).run(
        until=lambda t: t.records >= len(stream), max_seconds=90
    )

    assert totals.records == len(stream)
    assert totals.dead_letters == len(refused)
    assert set(MatchResult.objects.values_list("player_id", flat=True)) == {1, 2}
    letters = {letter.key: letter for letter in topic_read(dlq, count=len(refused))}
    for n, sent in enumerate(refused):
        letter = letters[f"future-{n}".encode()]
        headers = {k: v.decode() for k, v in letter.headers}
        assert headers["dlq.code"] == "achieved_in_future"
        assert "future" in headers["dlq.reason"]
        assert letter.value == sent.value()


def test_the_door_refuses_results_from_the_future(door_topic, live_season, settings):
    settings.INGEST_MAX_FUTURE_SKEW_SECONDS = 300
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {game_server_token_create(name='eu')[1]}")
    now = timezone.now()

    def item(when) -> dict:
        return Result(uuid.uuid4(), 42, live_season.id, 10, when).message()

    response = client.post(
        "/api/match-results",
        [item(now + timedelta(seconds=60)), item(now + timedelta(hours=2))],
        format="json",
    )
    assert response.status_code == 400, response.content
    (invalid,) = response.json()["invalid"]
    assert invalid["index"] == 1
    assert invalid["code"] == "achieved_in_future"
    assert invalid["field"] == "achievedAt"

    # The skew is configurable: with none, a minute ahead is refused too.
    settings.INGEST_MAX_FUTURE_SKEW_SECONDS = 0
    response = client.post("/api/match-results", item(now + timedelta(seconds=60)), format="json")
    assert response.status_code == 400
    assert response.json()["invalid"][0]["code"] == "achieved_in_future"

    settings.INGEST_MAX_FUTURE_SKEW_SECONDS = 300
    response = client.post("/api/match-results", item(now + timedelta(seconds=60)), format="json")
    assert response.status_code == 202, response.content
