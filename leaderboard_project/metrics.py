"""Prometheus metrics of the web processes: HTTP requests, and the boards read at scrape time.

Which process counts what (docs/operations.md, "Metrics"):

- gunicorn's workers each count their own requests; with ``PROMETHEUS_MULTIPROC_DIR`` set,
  prometheus_client keeps every worker's values in a file there and ``/metrics`` (served by any
  one worker) sums the files, so a scrape sees the whole server, not the worker it landed on.
- Board sizes and top-snapshot ages are facts of Redis, not of a process: ``BoardsCollector``
  reads them when scraped, so they are never stale and never summed across workers.
- The webhooks' figures come from the deliverers' stats in Redis and the batches kept in
  PostgreSQL, also read when scraped (``webhooks.metrics``).
- Each consumer and the Celery worker serve their own port (``ingestion.metrics``,
  ``leaderboard_project.task_metrics``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from leaderboard.selectors.boards import board_list_live
from leaderboard.selectors.sizes import board_sizes_get
from leaderboard.selectors.top import top_snapshot_times_get
from webhooks.metrics import WebhooksCollector

logger = logging.getLogger(__name__)

# No `<name>_created` series beside every counter and histogram: Prometheus 2 stores them as
# separate gauges that nobody queries, doubling the series count (process-wide, idempotent).
disable_created_metrics()

HTTP_REQUESTS = Counter(
    "leaderboard_http_requests",
    "HTTP requests answered, by view (URL pattern name), method and status.",
    ["view", "method", "status"],
)
HTTP_SECONDS = Histogram(
    "leaderboard_http_request_duration_seconds",
    "Time from the first middleware in to the response out, by view, method and status.",
    ["view", "method", "status"],
    # The read API answers in about a millisecond; the admin and rebuild pages take longer.
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)

# Requests no URL pattern matched (404s, static files): one label value, whatever the path, so
# that a scanner probing random paths cannot create series without end.
UNRESOLVED_VIEW = "<unresolved>"


# The methods a label names; any other (a client may send any token) is counted as "other".
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class PrometheusHttpMiddleware:
    """Counts and times every request, labelled by the resolved view's name and the method
    (both bounded), never by the path (unbounded: player ids, dates)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        match = request.resolver_match
        # view_name: the pattern's name, or the view's dotted path when the pattern has none.
        view = match.view_name if match is not None else UNRESOLVED_VIEW
        method = request.method if request.method in _METHODS else "other"
        labels = {"view": view, "method": method, "status": str(response.status_code)}
        HTTP_REQUESTS.labels(**labels).inc()
        HTTP_SECONDS.labels(**labels).observe(time.perf_counter() - started)
        return response


class BoardsCollector(Collector):
    """Per live board: its size and the age of its top-list snapshot, read when scraped."""

    def collect(self) -> Iterator[Metric]:
        size = GaugeMetricFamily(
            "leaderboard_board_size",
            "Players on the board in Redis, per board of an active or closing season.",
            labels=["season", "board"],
        )
        age = GaugeMetricFamily(
            "leaderboard_top_snapshot_age_seconds",
            "Seconds since the board's top-list snapshot was generated; +Inf when there is none "
            "(the refresh task has not run for longer than the snapshot's TTL).",
            labels=["season", "board"],
        )
        up = GaugeMetricFamily(
            "leaderboard_boards_collector_up",
            "1 when the board metrics could be read (PostgreSQL and Redis answered), else 0.",
        )
        try:
            boards = board_list_live()
            sizes = board_sizes_get(boards=boards)
            generated = top_snapshot_times_get(boards=boards)
        except Exception:
            # A scrape must still answer (the HTTP and process metrics matter most when a
            # dependency is down); the failure shows as this gauge at 0 and in the log.
            logger.exception("board metrics unavailable")
            up.add_metric([], 0)
            yield up
            return
        now = time.time()
        for board in boards:
            labels = [str(board.season_id), board.slug]
            size.add_metric(labels, sizes[board.id])
            at = generated[board.id]
            age.add_metric(labels, math.inf if at is None else max(0.0, now - at))
        up.add_metric([], 1)
        yield from (size, age, up)


class _ProcessRegistry(Collector):
    """This process's own metrics (the default registry), when not in multiprocess mode."""

    def collect(self) -> Iterator[Metric]:
        yield from REGISTRY.collect()


def metrics_exposition() -> bytes:
    """The Prometheus text of this web server: every worker's metrics, the boards, the
    webhooks."""
    registry = CollectorRegistry(auto_describe=False)
    if settings.PROMETHEUS_MULTIPROC_DIR:
        MultiProcessCollector(registry, path=settings.PROMETHEUS_MULTIPROC_DIR)
    else:
        registry.register(_ProcessRegistry())
    registry.register(BoardsCollector())
    registry.register(WebhooksCollector())
    return generate_latest(registry)
