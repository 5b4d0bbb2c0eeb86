"""The whole path of a rank event: match results through the real consumer, the events it
publishes to Kafka, the deliverer, and signed POSTs to the endpoints that asked for them.

The other webhook tests publish events made by hand; this one takes the write path's own, so a
field the write path names or formats differently from what the deliverer reads fails here.
"""

from __future__ import annotations

import json

import pytest

from ingestion.consumer import MatchResultConsumer
from leaderboard.models import Board, ScoringRule
from seasons.models import SeasonStatus
from tests.helpers import make_season, wait_until
from tests.ingestion.ingest_helpers import consumer_options, publish_results, seeded_results
from tests.ingestion.topic_reader import topic_read
from webhooks.services import webhook_endpoint_create

from .webhook_helpers import (
    SECRET,
    deliverer_options,
    running_deliverer,
    verify_independently,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_the_write_paths_events_reach_the_endpoints_that_asked_for_them_signed(
    topic_and_dlq, events_topics, receiver_factory, board_redis
) -> None:
    season = make_season(rule=ScoringRule.BEST, status=SeasonStatus.ACTIVE)
    board = Board.objects.get(season=season, slug="main")
    board.event_top_n = 5
    board.save()
    events_topic, events_dlq = events_topics
    topic, dlq = topic_and_dlq("results", partitions=2)
    results = seeded_results(season, 200, players=30, seed=7)
    publish_results(topic, results)
    totals = MatchResultConsumer(
        consumer_options(topic=topic, dead_letter_topic=dlq, rank_events_topic=events_topic)
    ).run(until=lambda t: t.records >= len(results), max_seconds=90)
    assert totals.applied == len(results)
    published = {
        event["eventId"]: event
        for event in (json.loads(record.value) for record in topic_read(events_topic))
    }
    assert {e["type"] for e in published.values()} >= {"personal_best", "rank_changed"}

    everything = receiver_factory()
    top_only = receiver_factory()
    webhook_endpoint_create(url=everything.url, secret=SECRET)
    webhook_endpoint_create(
        url=top_only.url,
        secret=SECRET,
        event_types=["entered_top", "left_top"],
        boards=[f"{season.id}/main"],
    )
    wanted_top = {i for i, e in published.items() if e["type"] in {"entered_top", "left_top"}}
    assert wanted_top, "the results put somebody into the top 5"
    with running_deliverer(deliverer_options(topic=events_topic, dead_letter_topic=events_dlq)):
        wait_until(lambda: set(everything.event_ids()) == set(published), timeout=60)
        wait_until(lambda: set(top_only.event_ids()) == wanted_top, timeout=60)

    for receiver in (everything, top_only):
        for request in receiver.answered():
            verify_independently(
                secret=SECRET,
                header=request.headers["X-Leaderboard-Signature"],
                body=request.body,
            )
            # Delivered as the write path published them, field for field.
            for event in request.events:
                assert event == published[event["eventId"]]
