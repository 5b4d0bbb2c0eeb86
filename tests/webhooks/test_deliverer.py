"""The deliverer against real Kafka, PostgreSQL and Redis, delivering to real local HTTP
servers: batches, signatures, filters, retries, slow and failing endpoints, the give-up."""

from __future__ import annotations

import json
import time

import pytest

from tests.helpers import make_season, wait_until
from tests.ingestion.ingest_helpers import publish
from webhooks.models import WebhookDelivery
from webhooks.services import webhook_endpoint_create
from webhooks.signing import DELIVERY_HEADER, EVENT_IDS_HEADER, SIGNATURE_HEADER

from .webhook_helpers import (
    SECRET,
    all_committed,
    deliverer_options,
    publish_events,
    rank_event,
    running_deliverer,
    verify_independently,
    wait_for_events,
)

pytestmark = pytest.mark.django_db(transaction=True)


def test_events_arrive_signed_in_batches_of_at_most_100_and_offsets_are_committed(
    events_topics, receiver_factory
):
    topic, dlq = events_topics
    receiver = receiver_factory()
    endpoint, _ = webhook_endpoint_create(url=receiver.url, secret=SECRET)
    events = [rank_event(player_id=p) for p in range(250)]
    options = deliverer_options(topic=topic, dead_letter_topic=dlq)
    publish_events(topic, events)
    with running_deliverer(options):
        wait_for_events(receiver, {e["eventId"] for e in events})
        wait_until(lambda: all_committed(topic, options.group_id))
    requests = receiver.answered()
    assert all(len(r.events) <= 100 for r in requests)
    assert sorted(receiver.event_ids()) == sorted(e["eventId"] for e in events)
    by_id = {e["eventId"]: e for e in events}
    for request in requests:
        signed_at = verify_independently(
            secret=SECRET, header=request.headers[SIGNATURE_HEADER], body=request.body
        )
        assert abs(signed_at - time.time()) < 60
        assert request.headers[EVENT_IDS_HEADER].split(",") == request.event_ids
        assert request.headers["Content-Type"] == "application/json"
        assert len(request.headers[DELIVERY_HEADER]) == 36
        # Each event exactly as published.
        assert all(e == by_id[e["eventId"]] for e in request.events)
    assert not WebhookDelivery.objects.filter(endpoint=endpoint).exists()


def test_each_endpoint_gets_only_the_types_and_boards_it_asked_for(events_topics, receiver_factory):
    topic, dlq = events_topics
    make_season(id=31)
    from leaderboard.services import board_create

    board_create(season_id=31, slug="kills", name="Kills")
    everything, tops, kills = (receiver_factory() for _ in range(3))
    webhook_endpoint_create(url=everything.url, secret=SECRET)
    webhook_endpoint_create(url=tops.url, secret=SECRET, event_types=["entered_top", "left_top"])
    webhook_endpoint_create(url=kills.url, secret=SECRET, boards=["31/kills"])
    events = [
        rank_event(event_type="entered_top", season_id=31, board="main"),
        rank_event(event_type="left_top", season_id=31, board="kills"),
        rank_event(event_type="rank_changed", season_id=31, board="kills"),
        rank_event(event_type="personal_best", season_id=31, board="main"),
        rank_event(event_type="entered_top", season_id=32, board="kills"),
    ]
    publish_events(topic, events)
    ids = [e["eventId"] for e in events]
    with running_deliverer(deliverer_options(topic=topic, dead_letter_topic=dlq)):
        wait_for_events(everything, set(ids))
        wait_for_events(tops, {ids[0], ids[1], ids[4]})
        wait_for_events(kills, {ids[1], ids[2]})
    assert sorted(tops.event_ids()) == sorted([ids[0], ids[1], ids[4]])
    assert sorted(kills.event_ids()) == sorted([ids[1], ids[2]])


def test_an_event_it_cannot_read_is_a_dead_letter_and_the_rest_go_on(
    events_topics, receiver_factory
):
    from tests.ingestion.topic_reader import topic_read

    topic, dlq = events_topics
    receiver = receiver_factory()
    webhook_endpoint_create(url=receiver.url, secret=SECRET)
    good = rank_event()
    no_id = rank_event()
    del no_id["eventId"]
    publish(
        topic,
        [
            (b"1", b"not json"),
            (b"1", json.dumps(no_id).encode()),
            (b"1", json.dumps(rank_event(event_id="a,b")).encode()),
            (b"1", json.dumps(good).encode()),
        ],
    )
    options = deliverer_options(topic=topic, dead_letter_topic=dlq)
    with running_deliverer(options):
        wait_for_events(receiver, {good["eventId"]})
        wait_until(lambda: all_committed(topic, options.group_id))
    letters = topic_read(dlq, count=3)
    codes = sorted(dict(letter.headers)["dlq.code"].decode() for letter in letters)
    assert codes == ["invalid_event", "invalid_event", "invalid_json"]
    assert receiver.event_ids() == [good["eventId"]]
