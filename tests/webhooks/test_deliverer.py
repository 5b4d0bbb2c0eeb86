"""The deliverer against real Kafka, PostgreSQL and Redis, delivering to real local HTTP
servers: batches, signatures, filters, retries, slow and failing endpoints, the give-up."""

from __future__ import annotations

import itertools
import json
import threading
import time

import pytest

from tests.helpers import make_season, wait_until
from tests.ingestion.ingest_helpers import publish
from webhooks.models import DeliveryStatus, WebhookDelivery
from webhooks.services import webhook_endpoint_create
from webhooks.signing import DELIVERY_HEADER, EVENT_IDS_HEADER, SIGNATURE_HEADER
from webhooks.worker import KEPT_QUEUE_FULL

from .webhook_helpers import (
    SECRET,
    FakeClock,
    assert_received,
    deliverer_options,
    publish_events,
    rank_event,
    running_deliverer,
    verify_independently,
    wait_committed,
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
    with running_deliverer(options) as running:
        wait_for_events(receiver, {e["eventId"] for e in events})
        wait_committed(topic, options.group_id)
    requests = receiver.answered()
    assert all(len(r.events) <= 100 for r in requests)
    assert_received(receiver, (e["eventId"] for e in events), running)
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
    with running_deliverer(deliverer_options(topic=topic, dead_letter_topic=dlq)) as running:
        wait_for_events(everything, set(ids))
        wait_for_events(tops, {ids[0], ids[1], ids[4]})
        wait_for_events(kills, {ids[1], ids[2]})
    assert_received(tops, [ids[0], ids[1], ids[4]], running)
    assert_received(kills, [ids[1], ids[2]], running)


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
    with running_deliverer(options) as running:
        wait_for_events(receiver, {good["eventId"]})
        wait_committed(topic, options.group_id)
    letters = topic_read(dlq, until=lambda read: len(_by_source(read)) >= 3)
    codes = sorted(_by_source(letters).values())
    assert codes == ["invalid_event", "invalid_event", "invalid_json"]
    # A deliverer that ended as stalled before committing reads the bad events again after its
    # restart and sets them aside again: dead letters are at least once, as deliveries are.
    if not running.restarts:
        assert len(letters) == 3
    assert_received(receiver, [good["eventId"]], running)


def _by_source(letters) -> dict[tuple[str, str], str]:
    """Each dead letter's code by the partition and offset of the event it sets aside."""
    by_source = {}
    for letter in letters:
        headers = dict(letter.headers)
        source = (headers["dlq.source.partition"].decode(), headers["dlq.source.offset"].decode())
        by_source[source] = headers["dlq.code"].decode()
    return by_source


def test_a_failing_receiver_is_retried_with_growing_jittered_delays_until_it_accepts(
    events_topics, receiver_factory
):
    topic, dlq = events_topics
    receiver = receiver_factory(behaviour=lambda n: 500 if n <= 4 else 204)
    endpoint, _ = webhook_endpoint_create(url=receiver.url, secret=SECRET)
    event = rank_event()
    publish_events(topic, [event])
    options = deliverer_options(topic=topic, dead_letter_topic=dlq, retry_first=0.4, retry_max=10)
    with running_deliverer(options) as running:
        wait_for_events(receiver, {event["eventId"]})
        wait_committed(topic, options.group_id)
        wait_until(lambda: not WebhookDelivery.objects.filter(endpoint=endpoint).exists())
    everything = receiver.answered()
    answered = everything[:5]
    assert [r.status for r in answered] == [500, 500, 500, 500, 204]
    # At least once: a deliverer that ended as stalled (its commits refused by a group that did
    # not settle) before committing reads the event again after its restart, and sends it again.
    assert [r.status for r in everything[5:]] == [204] * (len(everything) - 5)
    assert len(everything) - 5 <= running.restarts
    # The same batch every time: its delivery id is kept with it.
    assert len({r.headers[DELIVERY_HEADER] for r in answered}) == 1
    gaps = [b.at - a.at for a, b in itertools.pairwise(answered)]
    for failures, gap in enumerate(gaps, start=1):
        ceiling = 0.4 * 2 ** (failures - 1)
        # Drawn between half the exponential delay and all of it; the machine may add to it.
        assert ceiling / 2 - 0.05 <= gap <= ceiling + 1.0, (failures, gaps)
    assert gaps[3] > gaps[0] * 2


def test_a_failing_endpoint_beside_a_healthy_one_gets_its_events_kept_and_the_offsets_move_on(
    events_topics, receiver_factory
):
    topic, dlq = events_topics
    healthy = receiver_factory()
    status = {"failing": 503}
    failing = receiver_factory(behaviour=lambda n: status["failing"])
    webhook_endpoint_create(url=healthy.url, secret=SECRET)
    broken, _ = webhook_endpoint_create(url=failing.url, secret=SECRET)
    events = [rank_event(player_id=p) for p in range(300)]
    ids = {e["eventId"] for e in events}
    publish_events(topic, events)
    options = deliverer_options(topic=topic, dead_letter_topic=dlq, retry_first=0.5, retry_max=1)

    def kept_ids() -> set[str]:
        rows = WebhookDelivery.objects.filter(endpoint=broken, status=DeliveryStatus.PENDING)
        return {i for row in rows for i in row.event_ids}

    with running_deliverer(options) as running:
        wait_for_events(healthy, ids)
        # Everything the failing endpoint did not take is kept, so the offsets are committed.
        wait_until(lambda: kept_ids() == ids, timeout=30)
        wait_committed(topic, options.group_id)
        assert failing.event_ids() == []
        kept = WebhookDelivery.objects.filter(endpoint=broken)
        assert all(row.event_count <= 100 for row in kept)
        assert any("HTTP 503" in row.last_error for row in kept)
        status["failing"] = 204
        wait_for_events(failing, ids)
        wait_until(lambda: not WebhookDelivery.objects.filter(endpoint=broken).exists())
    assert_received(healthy, ids, running)


def test_a_slow_endpoint_never_holds_up_a_fast_one_and_its_overflow_is_kept(
    events_topics, receiver_factory
):
    topic, dlq = events_topics
    gate = threading.Event()
    fast = receiver_factory()
    slow = receiver_factory(hold=gate)
    webhook_endpoint_create(url=fast.url, secret=SECRET)
    stuck, _ = webhook_endpoint_create(url=slow.url, secret=SECRET)
    events = [rank_event(player_id=p) for p in range(400)]
    ids = {e["eventId"] for e in events}
    options = deliverer_options(
        topic=topic, dead_letter_topic=dlq, queue_size=50, read_timeout=30.0
    )
    publish_events(topic, events)
    with running_deliverer(options):
        wait_for_events(fast, ids)
        # All the while the slow endpoint sat on its first request.
        assert slow.attempts <= 1
        assert slow.event_ids() == []
        # It held the reading of Kafka up for a second at most, then counted as slow: what it
        # could not take waits in PostgreSQL, not in memory (50 queued, 100 in flight).
        wait_until(
            lambda: (
                sum(r.event_count for r in WebhookDelivery.objects.filter(endpoint=stuck))
                >= 400 - 50 - 100
            )
        )
        overflow = WebhookDelivery.objects.filter(endpoint=stuck)
        assert {(row.attempts, row.last_error) for row in overflow} == {(0, KEPT_QUEUE_FULL)}
        gate.set()
        wait_for_events(slow, ids, timeout=60)
        wait_committed(topic, options.group_id)
        wait_until(lambda: not WebhookDelivery.objects.filter(endpoint=stuck).exists())


def test_a_batch_is_retried_for_24_hours_then_kept_as_failed(events_topics, receiver_factory):
    """The deliverer's clock jumps instead of the test waiting a day."""
    topic, dlq = events_topics
    receiver = receiver_factory(behaviour=lambda n: 500)
    endpoint, _ = webhook_endpoint_create(url=receiver.url, secret=SECRET)
    event = rank_event()
    publish_events(topic, [event])
    clock = FakeClock()
    started = clock()
    options = deliverer_options(
        topic=topic, dead_letter_topic=dlq, retry_first=60.0, retry_max=3600.0, retry_hours=24
    )

    def batch() -> WebhookDelivery | None:
        return WebhookDelivery.objects.filter(endpoint=endpoint).first()

    def tried(times: int) -> bool:
        row = batch()
        return row is not None and row.attempts == times and receiver.attempts == times

    with running_deliverer(options, clock=clock):
        wait_until(lambda: tried(1))
        row = batch()
        assert row is not None
        assert row.status == DeliveryStatus.PENDING
        assert row.give_up_at.timestamp() == pytest.approx(started + 24 * 3600, abs=5)
        assert 30 <= row.next_attempt_at.timestamp() - started <= 60
        clock.advance(61)
        wait_until(lambda: tried(2))
        clock.advance(23 * 3600)
        wait_until(lambda: tried(3))
        row = batch()
        assert row is not None
        assert row.status == DeliveryStatus.PENDING  # its next try still falls within the day
        clock.advance(3600)
        wait_until(lambda: tried(4))
        row = batch()
        assert row is not None
        assert row.status == DeliveryStatus.FAILED
        assert row.event_ids == [event["eventId"]]
        assert "HTTP 500" in row.last_error
        # Given up: never tried again, whatever the time. The next request the endpoint gets
        # carries a later event only.
        clock.advance(7 * 24 * 3600)
        later = rank_event()
        publish_events(topic, [later])
        wait_until(lambda: receiver.attempts == 5)
        assert receiver.answered()[-1].event_ids == [later["eventId"]]
        failed = WebhookDelivery.objects.get(status=DeliveryStatus.FAILED)
        assert failed.attempts == 4
    assert receiver.event_ids() == []


def test_a_backlog_reaches_endpoints_that_keep_up_at_their_pace_never_through_postgresql(
    events_topics, receiver_factory
):
    topic, dlq = events_topics
    receivers = [receiver_factory(delay=0.01) for _ in range(2)]
    for receiver in receivers:
        webhook_endpoint_create(url=receiver.url, secret=SECRET)
    events = [rank_event(player_id=p) for p in range(2000)]
    ids = {e["eventId"] for e in events}
    publish_events(topic, events)
    # Queues far smaller than the backlog: the reading of Kafka pauses while they are full.
    options = deliverer_options(topic=topic, dead_letter_topic=dlq, queue_size=50)
    with running_deliverer(options) as deliverer:
        for receiver in receivers:
            wait_for_events(receiver, ids)
        wait_committed(topic, options.group_id)
    assert deliverer.totals.overflow == 0
    assert not WebhookDelivery.objects.exists()
    for receiver in receivers:
        assert_received(receiver, ids, deliverer)
