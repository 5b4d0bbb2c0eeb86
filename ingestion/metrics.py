"""Prometheus metrics of one consumer process, served on its own port.

Each consumer is a scrape target of its own (``--metrics-port`` / ``INGEST_METRICS_PORT``) rather
than a writer into a shared multiprocess folder: consumers run on any host (one per pod), a
consumer owns its partitions' lag and offsets outright, and a dead one shows as ``up == 0``
instead of leaving its last figures behind in a folder. docs/operations.md, "Metrics".

The counters count what this process did since it started (Prometheus' ``rate()`` and
``increase()`` absorb restarts); the Redis stats hash (``stats.py``) stays the JSON's source.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping

from prometheus_client import (
    REGISTRY,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    start_http_server,
)

logger = logging.getLogger(__name__)

# No `<name>_created` series beside every counter and histogram: Prometheus 2 stores them as
# separate gauges that nobody queries, doubling the series count (process-wide, idempotent).
disable_created_metrics()

RECORDS = Counter(
    "leaderboard_ingest_records", "Kafka records handled by this consumer.", ["topic"]
)
APPLIED = Counter(
    "leaderboard_ingest_results_applied", "Results that now count on the boards.", ["topic"]
)
DUPLICATES = Counter(
    "leaderboard_ingest_duplicates",
    "Results already stored or applied before (redeliveries, re-sent results).",
    ["topic"],
)
NOT_COUNTED = Counter(
    "leaderboard_ingest_not_counted",
    "Results stored but not applied: voided, banned player, cumulative overflow.",
    ["topic"],
)
RANK_EVENTS = Counter(
    "leaderboard_ingest_rank_events",
    "Rank events published to the rank-events topic (docs/events.md).",
    ["topic"],
)
DEAD_LETTERS = Counter(
    "leaderboard_ingest_dead_letters",
    "Messages sent to the dead-letter topic, by reason code (docs/ingestion.md).",
    ["topic", "reason"],
)
BATCH_SECONDS = Histogram(
    "leaderboard_ingest_batch_apply_seconds",
    "Time to validate, store and apply one polled batch (PostgreSQL and Redis).",
    ["topic"],
    # A batch of 5,000 takes tens of milliseconds; seconds mean a dependency is struggling.
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
LAG = Gauge(
    "leaderboard_ingest_lag",
    "Records not yet consumed: high watermark minus committed offset, per assigned partition.",
    ["topic", "partition"],
)
COMMITTED = Gauge(
    "leaderboard_ingest_committed_offset",
    "The offset this consumer last committed (the next one to read), per partition.",
    ["topic", "partition"],
)


LOOP_TIMESTAMP = Gauge(
    "leaderboard_ingest_loop_timestamp_seconds",
    "Unix time of this consumer's last pass through its loop (a poll, and the batch it returned "
    "handled): it stands still while a batch waits for a dependency or a call hangs.",
    ["topic"],
)


def dead_letters_initialise(*, topic: str, reasons: Iterable[str]) -> None:
    """Every reason's series at 0 from the start: a series born at its first dead letters would
    begin at their count, and ``increase()`` (the alert) sees no increase in its first sample."""
    for reason in reasons:
        DEAD_LETTERS.labels(topic=topic, reason=reason)


def loop_passed(*, topic: str) -> None:
    LOOP_TIMESTAMP.labels(topic=topic).set_to_current_time()


def dead_letters_count(*, topic: str, reasons: Iterable[str]) -> None:
    for reason in reasons:
        DEAD_LETTERS.labels(topic=topic, reason=reason).inc()


def partitions_observe(
    *,
    topic: str,
    lag: Mapping[int, int],
    committed: Mapping[int, int],
    assigned: Collection[int],
) -> None:
    """Set the per-partition gauges; partitions no longer assigned lose their lag series and
    their committed-offset series (their new owner reports both), so a sum over consumers does
    not count a partition twice and two consumers never show two committed offsets for one.
    ``assigned`` empty (between a rebalance's revoke and its assignment): the committed offsets
    are left as they are, to be judged at the next observation."""
    for partition, value in lag.items():
        LAG.labels(topic=topic, partition=str(partition)).set(value)
    for partition, offset in committed.items():
        if not assigned or partition in assigned:
            COMMITTED.labels(topic=topic, partition=str(partition)).set(offset)
    for labels in _label_sets(LAG):
        if labels[0] == topic and int(labels[1]) not in lag:
            LAG.remove(*labels)
    if assigned:
        for labels in _label_sets(COMMITTED):
            if labels[0] == topic and int(labels[1]) not in assigned:
                COMMITTED.remove(*labels)


def _label_sets(gauge: Gauge) -> list[tuple[str, ...]]:
    # prometheus_client has no public listing of a metric's children; collect() gives samples.
    return [
        (sample.labels["topic"], sample.labels["partition"])
        for family in gauge.collect()
        for sample in family.samples
    ]


def metrics_server_start(*, address: str, port: int) -> None:
    """Serve this process's metrics (Prometheus text, any path) on ``address:port``, in a
    daemon thread; raises OSError when the port is taken."""
    start_http_server(port, addr=address, registry=REGISTRY)
    logger.info("serving Prometheus metrics on http://%s:%d/metrics", address, port)
