"""Reads of the webhooks: the endpoints as the deliverer routes to them, what is kept for each,
the overview /metrics and the dashboard show, the demo receiver's last requests."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Min, Q, Sum
from django.db.models.functions import Coalesce, Greatest

from leaderboard import keys
from leaderboard.redis import get_board_redis

from .crypto import SecretUnreadable, secret_decrypt
from .events import RankEvent
from .models import DeliveryStatus, WebhookDelivery, WebhookEndpoint
from .services.receiver import DemoReceipt
from .stats import DelivererStats, EndpointLive, deliverer_stats_list


@dataclass(frozen=True, slots=True)
class EndpointConfig:
    """An active endpoint as the deliverer uses it, its secret decrypted (None when it cannot
    be: ``secret_error`` says why, and every try fails with that error until it is reset)."""

    endpoint_id: int
    name: str
    url: str
    secret: str | None
    secret_error: str
    event_types: frozenset[str]  # empty: every type
    boards: frozenset[str]  # empty: every board

    def wants(self, event: RankEvent) -> bool:
        return (not self.event_types or event.type in self.event_types) and (
            not self.boards or event.board in self.boards
        )


def webhook_endpoints_active() -> list[EndpointConfig]:
    configs = []
    for endpoint in WebhookEndpoint.objects.filter(is_active=True).order_by("id"):
        try:
            secret: str | None = secret_decrypt(endpoint.secret_encrypted)
            error = ""
        except SecretUnreadable as exc:
            secret, error = None, str(exc)
        configs.append(
            EndpointConfig(
                endpoint_id=endpoint.id,
                name=endpoint.name,
                url=endpoint.url,
                secret=secret,
                secret_error=error,
                event_types=frozenset(endpoint.event_types),
                boards=frozenset(endpoint.boards),
            )
        )
    return configs


def webhook_endpoint_secret(*, endpoint_id: int) -> str | None:
    """The endpoint's secret, decrypted (the demo receiver checks signatures with it); None
    for an unknown endpoint. Raises SecretUnreadable."""
    encrypted = (
        WebhookEndpoint.objects.filter(id=endpoint_id)
        .values_list("secret_encrypted", flat=True)
        .first()
    )
    return None if encrypted is None else secret_decrypt(encrypted)


def webhook_next_due_at(*, endpoint_id: int) -> float | None:
    """When the endpoint's earliest kept batch can be claimed (unix seconds), or None: its
    next try, or the end of its lease while another try holds it (a due batch leased elsewhere
    made its worker claim nothing and ask again at once, in a loop)."""
    due = WebhookDelivery.objects.filter(
        endpoint_id=endpoint_id, status=DeliveryStatus.PENDING
    ).aggregate(due=Min(Greatest("next_attempt_at", Coalesce("lease_until", "next_attempt_at"))))[
        "due"
    ]
    return None if due is None else due.timestamp()


@dataclass(frozen=True, slots=True)
class KeptSummary:
    retrying_batches: int
    retrying_events: int
    failed_batches: int
    failed_events: int
    oldest_retrying_at: float | None  # when the oldest retrying event was read from Kafka


def webhook_kept_summary() -> dict[int, KeptSummary]:
    """Per endpoint with kept batches: how many, of which status (one grouped query)."""
    pending = Q(status=DeliveryStatus.PENDING)
    failed = Q(status=DeliveryStatus.FAILED)
    rows = WebhookDelivery.objects.values("endpoint_id").annotate(
        retrying_batches=Count("id", filter=pending),
        retrying_events=Sum("event_count", filter=pending, default=0),
        failed_batches=Count("id", filter=failed),
        failed_events=Sum("event_count", filter=failed, default=0),
        oldest=Min("received_at", filter=pending),
    )
    return {
        row["endpoint_id"]: KeptSummary(
            retrying_batches=row["retrying_batches"],
            retrying_events=row["retrying_events"],
            failed_batches=row["failed_batches"],
            failed_events=row["failed_events"],
            oldest_retrying_at=None if row["oldest"] is None else row["oldest"].timestamp(),
        )
        for row in rows
    }


@dataclass(frozen=True, slots=True)
class EndpointOverview:
    """One endpoint: its counters summed over the live deliverers (since each started), what
    they hold in memory, and what PostgreSQL keeps for it."""

    endpoint: WebhookEndpoint
    delivered_events: int
    failed_attempts: int
    queued_events: int
    kept: KeptSummary
    lag_seconds: float  # age of the oldest event it does not have yet (0: none waiting)
    last_success_at: float | None
    last_failure_at: float | None
    last_error: str


@dataclass(frozen=True, slots=True)
class WebhooksOverview:
    endpoints: list[EndpointOverview]
    deliverers: list[DelivererStats]

    @property
    def kafka_lag(self) -> int | None:
        lags = [d.kafka_lag for d in self.deliverers if d.kafka_lag is not None]
        return sum(lags) if lags else None


_NO_KEPT = KeptSummary(0, 0, 0, 0, None)


def webhooks_overview(*, now: float | None = None) -> WebhooksOverview:
    """Every endpoint with its figures. Raises ``redis.RedisError`` or a database error when
    either cannot be read (callers show that rather than zeros)."""
    now = time.time() if now is None else now
    deliverers = deliverer_stats_list(now=now)
    kept = webhook_kept_summary()
    live: dict[int, list[EndpointLive]] = {}
    for deliverer in deliverers:
        for one in deliverer.endpoints:
            live.setdefault(one.endpoint_id, []).append(one)
    overviews = []
    for endpoint in WebhookEndpoint.objects.order_by("id"):
        figures = live.get(endpoint.id, [])
        summary = kept.get(endpoint.id, _NO_KEPT)
        waiting = [f.oldest_queued_at for f in figures if f.oldest_queued_at is not None]
        if summary.oldest_retrying_at is not None:
            waiting.append(summary.oldest_retrying_at)
        successes = [f.last_success_at for f in figures if f.last_success_at is not None]
        failures = [(f.last_failure_at, f.last_error) for f in figures if f.last_failure_at]
        last_failure = max(failures) if failures else None
        overviews.append(
            EndpointOverview(
                endpoint=endpoint,
                delivered_events=sum(f.delivered_events for f in figures),
                failed_attempts=sum(f.failed_attempts for f in figures),
                queued_events=sum(f.queued_events for f in figures),
                kept=summary,
                lag_seconds=max(0.0, now - min(waiting)) if waiting else 0.0,
                last_success_at=max(successes) if successes else None,
                last_failure_at=None if last_failure is None else last_failure[0],
                last_error="" if last_failure is None else last_failure[1],
            )
        )
    return WebhooksOverview(endpoints=overviews, deliverers=deliverers)


def demo_receipts_latest(*, limit: int = 50) -> list[DemoReceipt]:
    client = get_board_redis()
    raws: list[Any] = client.lrange(keys.webhook_demo_receipts(), 0, limit - 1)
    return [DemoReceipt.from_json(bytes(raw)) for raw in raws]
