"""``manage.py deliver_webhooks`` as a process: killed mid-batch or with batches kept, then
restarted with the same group: every event arrives (at least once), nothing is lost."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator

import pytest

from tests.helpers import wait_until
from webhooks.models import WebhookDelivery
from webhooks.services import webhook_endpoint_create

from .webhook_helpers import (
    SECRET,
    DelivererProcess,
    publish_events,
    rank_event,
    wait_committed,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def start_deliverer(tmp_path, events_topics) -> Iterator[Callable[[], DelivererProcess]]:
    """Each call starts the command again, on the same topic and group (a restart)."""
    topic, dlq = events_topics
    group = f"test-webhooks-{uuid.uuid4().hex[:12]}"
    started: list[DelivererProcess] = []

    def start() -> DelivererProcess:
        deliverer = DelivererProcess(topic=topic, dlq=dlq, group=group, log=tmp_path / "log")
        deliverer.start()
        started.append(deliverer)
        return deliverer

    yield start
    for deliverer in started:
        deliverer.kill_if_running()


def test_sigkill_mid_batch_then_a_restart_delivers_every_event(
    events_topics, receiver_factory, start_deliverer
):
    topic, _ = events_topics
    gate = threading.Event()

    def accept_two_then_hang(n: int) -> int:
        if n > 2:
            gate.wait(60)  # the third batch is in flight when the process dies
        return 204

    receiver = receiver_factory(behaviour=accept_two_then_hang)
    webhook_endpoint_create(url=receiver.url, secret=SECRET)
    events = [rank_event(player_id=p) for p in range(1000)]
    ids = {e["eventId"] for e in events}
    publish_events(topic, events)
    first = start_deliverer()
    wait_until(lambda: receiver.attempts >= 3, timeout=60, context=first.log_tail)
    first.kill()
    gate.set()
    assert len(set(receiver.event_ids())) < len(ids)
    second = start_deliverer()
    group = second.args[second.args.index("--group") + 1]
    wait_until(
        second.supervised(lambda: ids <= set(receiver.event_ids())),
        timeout=60,
        context=second.log_tail,
    )
    wait_committed(topic, group, context=second.log_tail, process=second)
    assert second.stop() == 0
    assert set(receiver.event_ids()) == ids


def test_batches_kept_before_a_sigkill_are_sent_after_the_restart(
    events_topics, receiver_factory, start_deliverer
):
    topic, _ = events_topics
    state = {"status": 500}
    receiver = receiver_factory(behaviour=lambda n: state["status"])
    endpoint, _ = webhook_endpoint_create(url=receiver.url, secret=SECRET)
    events = [rank_event(player_id=p) for p in range(250)]
    ids = {e["eventId"] for e in events}
    publish_events(topic, events)
    first = start_deliverer()
    group = first.args[first.args.index("--group") + 1]

    def kept() -> set[str]:
        return {
            i for row in WebhookDelivery.objects.filter(endpoint=endpoint) for i in row.event_ids
        }

    # Kept in PostgreSQL, so committed: the restart does not read them from Kafka again.
    wait_until(first.supervised(lambda: kept() == ids), timeout=60, context=first.log_tail)
    wait_committed(topic, group, context=first.log_tail, process=first)
    first.kill()
    state["status"] = 204
    second = start_deliverer()
    wait_until(
        second.supervised(lambda: ids <= set(receiver.event_ids())),
        timeout=60,
        context=second.log_tail,
    )
    wait_until(second.supervised(lambda: not kept()), timeout=30, context=second.log_tail)
    assert second.stop() == 0
    assert set(receiver.event_ids()) == ids
    # Each once, unless the restart itself ended as stalled before committing what it sent.
    if not second.restarts:
        assert sorted(receiver.event_ids()) == sorted(ids)
