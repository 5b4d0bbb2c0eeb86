"""Prometheus metrics of Celery tasks: outcomes and durations, from Celery's signals.

Tasks run in the worker's pool processes (prefork), not in the process that could serve a port,
so the worker runs in multiprocess mode: ``PROMETHEUS_MULTIPROC_DIR`` (a folder of the worker's
own, not the web's) holds each pool process's values, and the worker's main process serves their
sum on ``CELERY_METRICS_PORT``. docs/operations.md, "Metrics".
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    multiprocess,
    start_http_server,
)

logger = logging.getLogger(__name__)

# No `<name>_created` series beside every counter and histogram: Prometheus 2 stores them as
# separate gauges that nobody queries, doubling the series count (process-wide, idempotent).
disable_created_metrics()

TASKS = Counter(
    "leaderboard_celery_tasks",
    "Celery tasks finished, by task name and outcome (Celery's state: SUCCESS, FAILURE, RETRY...).",
    ["task", "outcome"],
)
TASK_SECONDS = Histogram(
    "leaderboard_celery_task_duration_seconds",
    "Run time of a Celery task, by task name and outcome.",
    ["task", "outcome"],
    # The snapshot refresh runs every second in milliseconds; a rebuild takes minutes.
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0),
)

# task id -> perf_counter at task_prerun; popped at task_postrun (same process, same thread).
_started: dict[str, float] = {}
_started_lock = threading.Lock()


def task_started(*, task_id: str) -> None:
    with _started_lock:
        _started[task_id] = time.perf_counter()


def task_finished(*, task_id: str, task_name: str, state: str | None) -> None:
    with _started_lock:
        started = _started.pop(task_id, None)
    outcome = state or "UNKNOWN"
    TASKS.labels(task=task_name, outcome=outcome).inc()
    if started is not None:
        TASK_SECONDS.labels(task=task_name, outcome=outcome).observe(time.perf_counter() - started)


def worker_metrics_start() -> None:
    """In the worker's main process, before the pool forks: empty the multiprocess folder (the
    values of a previous run's pool processes) and serve the metrics on CELERY_METRICS_PORT."""
    port = settings.CELERY_METRICS_PORT
    path = settings.PROMETHEUS_MULTIPROC_DIR
    if path:
        folder = Path(path)
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
    if not port:
        return
    if path:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=path)
    else:
        # Only the tasks run in this very process (a solo or threads pool) are seen.
        logger.warning("PROMETHEUS_MULTIPROC_DIR is unset: pool processes' tasks are not counted")
        registry = REGISTRY
    start_http_server(port, addr=settings.METRICS_LISTEN_ADDRESS, registry=registry)
    logger.info(
        "serving Celery metrics on http://%s:%d/metrics", settings.METRICS_LISTEN_ADDRESS, port
    )


def pool_process_exited(**kwargs: Any) -> None:
    """A pool process ends: its gauges' files are dropped (counters and histograms stay, summed)."""
    if settings.PROMETHEUS_MULTIPROC_DIR:
        multiprocess.mark_process_dead(os.getpid(), path=settings.PROMETHEUS_MULTIPROC_DIR)
