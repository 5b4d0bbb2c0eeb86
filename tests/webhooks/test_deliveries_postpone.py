"""While an endpoint fails, its kept batches wait for one probe; a batch whose retry window
ends while it waits is given up then, as its own try would have."""

from __future__ import annotations

import time
import uuid

import pytest

from webhooks.models import DeliveryStatus, WebhookDelivery
from webhooks.selectors import webhook_next_due_at
from webhooks.services import webhook_endpoint_create
from webhooks.services.deliveries import (
    BatchToKeep,
    at,
    webhook_deliveries_keep,
    webhook_deliveries_postpone,
)

pytestmark = pytest.mark.django_db

HOUR = 3600.0


def _kept(endpoint_id: int, *, now: float, retry_hours: float) -> uuid.UUID:
    delivery_id = uuid.uuid4()
    webhook_deliveries_keep(
        endpoint_id=endpoint_id,
        batches=[BatchToKeep(delivery_id, b"[]", ("e1", "e2"), now)],
        now=now,
        next_attempt_at=now,
        attempts=1,
        error="HTTP 500",
        retry_hours=retry_hours,
    )
    return delivery_id


def test_a_batch_whose_window_ends_before_the_next_try_is_given_up() -> None:
    endpoint, _ = webhook_endpoint_create(url="https://hooks.example.com/postpone")
    now = time.time()
    ending = _kept(endpoint.id, now=now - 23 * HOUR, retry_hours=24)  # an hour left
    fresh = _kept(endpoint.id, now=now, retry_hours=24)
    postponed = webhook_deliveries_postpone(endpoint_id=endpoint.id, until=now + 2 * HOUR, now=now)
    assert (postponed.given_up_batches, postponed.given_up_events) == (1, 2)
    assert WebhookDelivery.objects.get(id=ending).status == DeliveryStatus.FAILED
    waiting = WebhookDelivery.objects.get(id=fresh)
    assert waiting.status == DeliveryStatus.PENDING
    assert waiting.next_attempt_at.timestamp() == pytest.approx(now + 2 * HOUR, abs=1)


def test_a_batch_leased_to_another_try_is_due_when_its_lease_ends() -> None:
    """Its worker asked for the next due batch, found it leased, and asked again at once: a
    loop of queries for as long as the other try held it."""
    endpoint, _ = webhook_endpoint_create(url="https://hooks.example.com/leased")
    now = time.time()
    leased = _kept(endpoint.id, now=now - 60, retry_hours=24)
    WebhookDelivery.objects.filter(id=leased).update(lease_until=at(now + 40))
    assert webhook_next_due_at(endpoint_id=endpoint.id) == pytest.approx(now + 40, abs=1)
    free = _kept(endpoint.id, now=now - 30, retry_hours=24)
    assert webhook_next_due_at(endpoint_id=endpoint.id) == pytest.approx(now - 30, abs=1)
    WebhookDelivery.objects.filter(id=free).delete()
    WebhookDelivery.objects.filter(id=leased).update(lease_until=at(now - 1))  # lease ended
    assert webhook_next_due_at(endpoint_id=endpoint.id) == pytest.approx(now - 1, abs=1)
