"""Periodic season work (scheduled in leaderboard_project/schedules.py).

Every task is idempotent and takes ids: a retry or a duplicate delivery changes nothing twice.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.db import DatabaseError
from redis.exceptions import RedisError

from .services import season_statuses_sync

logger = logging.getLogger(__name__)

# Transient failures of PostgreSQL or Redis are retried with backoff; anything else is a bug
# and surfaces in the worker's log at once.
TRANSIENT_ERRORS = (DatabaseError, RedisError, ConnectionError)
# Bookkeeping tasks that run every few seconds: a stuck run is cut short, the next one follows.
QUICK_TASK: dict[str, Any] = {
    "autoretry_for": TRANSIENT_ERRORS,
    "retry_backoff": True,
    "max_retries": 3,
    "soft_time_limit": 20,
    "time_limit": 30,
}


@shared_task(**QUICK_TASK)
def season_statuses_sync_task() -> dict[str, list[int]]:
    result = season_statuses_sync()
    return {"activated": list(result.activated), "closing": list(result.closing)}
