"""Batches an endpoint does not have yet, kept in PostgreSQL (docs/webhooks.md, "Guarantees").

The deliverer keeps a batch when its POST failed or the endpoint's queue was full, and only
then lets the Kafka offsets of its events be committed; it claims due batches back, deletes one
once delivered, reschedules one that failed again, and gives one up (status failed) once its
next try would fall after ``give_up_at``. Staff resend or purge them from the admin. Times are
unix seconds from the deliverer's clock (injectable: the 24-hour give-up is tested with a
clock that jumps).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.db.models import Count, Q, Sum

from ..models import DeliveryStatus, WebhookDelivery


def at(unix_seconds: float) -> datetime:
    return datetime.fromtimestamp(unix_seconds, UTC)


@dataclass(frozen=True, slots=True)
class BatchToKeep:
    delivery_id: uuid.UUID
    body: bytes
    event_ids: tuple[str, ...]
    received_at: float  # when its oldest event was read from Kafka


@dataclass(frozen=True, slots=True)
class KeptBatch:
    """A kept batch claimed for one try."""

    delivery_id: uuid.UUID
    body: bytes
    event_ids: tuple[str, ...]
    attempts: int
    give_up_at: float


def webhook_deliveries_keep(
    *,
    endpoint_id: int,
    batches: Sequence[BatchToKeep],
    now: float,
    next_attempt_at: float,
    attempts: int,
    error: str,
    status: int | None = None,
    retry_hours: float,
) -> None:
    """Keep ``batches`` for ``endpoint_id``, to be tried from ``next_attempt_at`` on and given
    up ``retry_hours`` from now. Raises IntegrityError when the endpoint was deleted."""
    kept_at = at(now)
    WebhookDelivery.objects.bulk_create(
        [
            WebhookDelivery(
                id=batch.delivery_id,
                endpoint_id=endpoint_id,
                body=batch.body.decode("utf-8"),
                event_ids=list(batch.event_ids),
                event_count=len(batch.event_ids),
                attempts=attempts,
                received_at=at(batch.received_at),
                created_at=kept_at,
                next_attempt_at=at(next_attempt_at),
                give_up_at=kept_at + timedelta(hours=retry_hours),
                last_attempt_at=kept_at if attempts else None,
                last_status=status,
                last_error=error,
            )
            for batch in batches
        ]
    )


def webhook_delivery_claim_due(
    *, endpoint_id: int, now: float, lease_seconds: float
) -> KeptBatch | None:
    """The endpoint's kept batch due longest, leased to the caller for ``lease_seconds`` (two
    deliverers never try one batch at once); None when none is due."""
    moment = at(now)
    with transaction.atomic():
        row = (
            WebhookDelivery.objects.select_for_update(skip_locked=True)
            .filter(
                endpoint_id=endpoint_id,
                status=DeliveryStatus.PENDING,
                next_attempt_at__lte=moment,
            )
            .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=moment))
            .order_by("next_attempt_at", "created_at")
            .only("id", "body", "event_ids", "attempts", "give_up_at")
            .first()
        )
        if row is None:
            return None
        WebhookDelivery.objects.filter(id=row.id).update(
            lease_until=moment + timedelta(seconds=lease_seconds)
        )
    return KeptBatch(
        delivery_id=row.id,
        body=row.body.encode("utf-8"),
        event_ids=tuple(row.event_ids),
        attempts=row.attempts,
        give_up_at=row.give_up_at.timestamp(),
    )


def webhook_delivery_delivered(*, delivery_id: uuid.UUID) -> None:
    WebhookDelivery.objects.filter(id=delivery_id).delete()


def webhook_delivery_failed(
    *, delivery_id: uuid.UUID, now: float, retry_at: float, error: str, status: int | None
) -> bool:
    """Record a failed try; True when the batch is given up (its next try would come after its
    ``give_up_at``) and is now kept as failed."""
    with transaction.atomic():
        row = (
            WebhookDelivery.objects.select_for_update()
            .filter(id=delivery_id)
            .only("give_up_at", "attempts")
            .first()
        )
        if row is None:  # purged by staff meanwhile
            return False
        gave_up = at(retry_at) > row.give_up_at
        WebhookDelivery.objects.filter(id=delivery_id).update(
            attempts=row.attempts + 1,
            last_attempt_at=at(now),
            last_error=error,
            last_status=status,
            next_attempt_at=at(retry_at),
            lease_until=None,
            status=DeliveryStatus.FAILED if gave_up else DeliveryStatus.PENDING,
        )
    return gave_up


@dataclass(frozen=True, slots=True)
class Postponed:
    batches: int  # moved to ``until``
    given_up_batches: int  # whose retry window ends before ``until``: now failed
    given_up_events: int


def webhook_deliveries_postpone(*, endpoint_id: int, until: float, now: float) -> Postponed:
    """Move the endpoint's batches due before ``until`` to it: while an endpoint fails, one
    batch probes it and the others wait for the probe, instead of each hitting it.

    A batch whose retry window ends before ``until`` is given up now (failed, as its own try
    would have): only the probe is ever tried while the endpoint fails, so the others were
    never given up, and an endpoint down for three days was sent batches kept three days
    before, every one of them past its 24 hours."""
    moment = at(until)
    waiting = WebhookDelivery.objects.filter(
        endpoint_id=endpoint_id, status=DeliveryStatus.PENDING, next_attempt_at__lt=moment
    )
    with transaction.atomic():
        expired = waiting.filter(give_up_at__lt=moment).filter(
            Q(lease_until__isnull=True) | Q(lease_until__lt=at(now))
        )
        counted = expired.aggregate(batches=Count("id"), events=Sum("event_count"))
        given_up = expired.update(status=DeliveryStatus.FAILED, lease_until=None)
        moved = waiting.update(next_attempt_at=moment)
    return Postponed(
        batches=moved,
        given_up_batches=given_up,
        given_up_events=int(counted["events"] or 0) if given_up else 0,
    )


def webhook_deliveries_resend(
    *, delivery_ids: Iterable[uuid.UUID], now: float, retry_hours: float
) -> int:
    """Staff: try these batches again now, with a fresh ``retry_hours`` before giving up."""
    moment = at(now)
    return WebhookDelivery.objects.filter(id__in=list(delivery_ids)).update(
        status=DeliveryStatus.PENDING,
        next_attempt_at=moment,
        give_up_at=moment + timedelta(hours=retry_hours),
        lease_until=None,
    )


def webhook_deliveries_purge(*, delivery_ids: Iterable[uuid.UUID]) -> int:
    """Staff: drop these batches for good (their events are never sent)."""
    deleted, _ = WebhookDelivery.objects.filter(id__in=list(delivery_ids)).delete()
    return deleted
