"""Celery tasks that need both the boards and Kafka's committed offsets.

Periodic (leaderboard_project/schedules.py):

- ``ingestion.tasks.boards_recover_task``: every few seconds, finds boards Redis lost (or a
  restarted Redis) and repairs them (leaderboard/services/recovery.py).
- ``ingestion.tasks.boards_reconcile_task``: hourly, and once whenever beat starts
  (leaderboard_project/celery.py): every live board compared with PostgreSQL.
"""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from leaderboard.services import boards_reconcile_live_seasons, boards_recover

from .selectors import ingest_committed_offsets


# Every few seconds: a late run is worthless once the next is due, so it expires instead of
# piling up behind a long recovery (which holds each board's lock, so runs never collide).
@shared_task(
    name="ingestion.tasks.boards_recover_task",
    ignore_result=True,
    expires=5,
    soft_time_limit=1800,
    time_limit=1900,
)
def boards_recover_task() -> str:
    """Rebuild boards Redis lost; reconcile every board after a Redis restart."""
    return boards_recover(committed_offsets=ingest_committed_offsets).describe()


@shared_task(
    name="ingestion.tasks.boards_reconcile_task",
    soft_time_limit=3000,
    time_limit=3300,
    acks_late=True,
    ignore_result=True,
)
def boards_reconcile_task() -> int:
    """Compare every live board with PostgreSQL (in full up to RECONCILE_FULL_MAX_MEMBERS
    players) and repair drift; returns the number of drifted boards."""
    results = boards_reconcile_live_seasons(
        now=timezone.now(), committed_offsets=ingest_committed_offsets
    )
    return sum(1 for r in results if r.drift_found)
