"""Prometheus series of the webhooks, read when /metrics is scraped (docs/operations.md).

Like the board sizes, they are facts of shared stores rather than of the web process: the
deliverers' live counters (Redis, stats.py) and the batches PostgreSQL keeps. Per endpoint
(label ``endpoint`` = its id): events delivered and failed tries (summed over the live
deliverers, since each started: Prometheus' ``rate()`` absorbs a restart), events queued in
memory, events kept (``status`` retrying or failed), and the lag: the age of the oldest event
the endpoint does not have yet.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .selectors import webhooks_overview

logger = logging.getLogger(__name__)


class WebhooksCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "leaderboard_webhooks_collector_up",
            "1 when the webhook metrics could be read (PostgreSQL and Redis answered), else 0.",
        )
        try:
            overview = webhooks_overview(now=time.time())
        except Exception:
            logger.exception("webhook metrics unavailable")
            up.add_metric([], 0)
            yield up
            return
        labels = ["endpoint"]
        delivered = CounterMetricFamily(
            "leaderboard_webhook_events_delivered",
            "Events an endpoint answered 2xx for, summed over the live deliverers.",
            labels=labels,
        )
        failed = CounterMetricFamily(
            "leaderboard_webhook_failed_attempts",
            "POSTs to an endpoint that failed (no answer, timeout, refused target, non-2xx).",
            labels=labels,
        )
        queued = GaugeMetricFamily(
            "leaderboard_webhook_queued_events",
            "Events waiting in the deliverers' memory for an endpoint.",
            labels=labels,
        )
        kept = GaugeMetricFamily(
            "leaderboard_webhook_kept_events",
            "Events kept in PostgreSQL for an endpoint: retrying, or failed (gave up; staff "
            "resend or purge them).",
            labels=["endpoint", "status"],
        )
        lag = GaugeMetricFamily(
            "leaderboard_webhook_lag_seconds",
            "Age of the oldest event an endpoint does not have yet (0: none waiting).",
            labels=labels,
        )
        active = GaugeMetricFamily(
            "leaderboard_webhook_endpoint_active",
            "1 for an active endpoint, 0 for a paused one.",
            labels=labels,
        )
        for row in overview.endpoints:
            endpoint = [str(row.endpoint.id)]
            delivered.add_metric(endpoint, row.delivered_events)
            failed.add_metric(endpoint, row.failed_attempts)
            queued.add_metric(endpoint, row.queued_events)
            kept.add_metric([*endpoint, "retrying"], row.kept.retrying_events)
            kept.add_metric([*endpoint, "failed"], row.kept.failed_events)
            lag.add_metric(endpoint, row.lag_seconds)
            active.add_metric(endpoint, 1 if row.endpoint.is_active else 0)
        deliverers = GaugeMetricFamily(
            "leaderboard_webhook_deliverers",
            "Webhook deliverer processes that reported in the last two minutes.",
        )
        deliverers.add_metric([], len(overview.deliverers))
        yield from (delivered, failed, queued, kept, lag, active, deliverers)
        if overview.kafka_lag is not None:
            consumer_lag = GaugeMetricFamily(
                "leaderboard_webhook_consumer_lag",
                "Rank events the deliverers have not read yet (their group's lag, summed).",
            )
            consumer_lag.add_metric([], overview.kafka_lag)
            yield consumer_lag
        up.add_metric([], 1)
        yield up
