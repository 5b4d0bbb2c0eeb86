"""Periodic and on-demand close-out work (scheduled in leaderboard_project/schedules.py).

Every task is idempotent and takes ids: a retry or a duplicate delivery changes nothing twice.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from leaderboard.services import league_boards_open
from seasons.selectors import seasons_closing_since, seasons_keys_unreleased
from seasons.services import season_statuses_sync
from seasons.tasks import QUICK_TASK, TRANSIENT_ERRORS

from .services import (
    history_prune,
    schedules_advance,
    season_close,
    season_final_events_publish,
    season_history_archive,
    season_results_prune,
    seasons_final_events_due,
    seasons_history_due,
    seasons_results_prune_due,
)

# The close-out's long tasks: transient failures retried with backoff, a time limit each.
_RETRIED: dict[str, Any] = {
    "autoretry_for": TRANSIENT_ERRORS,
    "retry_backoff": True,
    "max_retries": 5,
}

# Seconds one close-out task waits for the consumer to drain before leaving it to the next sweep.
_TASK_DRAIN_WAIT_SECONDS = 10.0
# A close-out commits, publishes its season_final events, then unlinks: one still at it is
# left alone for this long before the sweep takes its keys for left behind.
_KEYS_RELEASE_GRACE_SECONDS = 300.0


@shared_task(**QUICK_TASK)
def seasons_close_due_task() -> list[int]:
    """Queue a close-out for every season whose end and drain grace have passed."""
    season_statuses_sync()
    due = seasons_closing_since(
        before=timezone.now() - timedelta(seconds=settings.SEASON_CLOSE_GRACE_SECONDS)
    )
    # League boards still waiting though the previous season of their league is closed (a crash
    # between that close-out's commit and its opening of them).
    league_boards_open()
    for season_id in due:
        season_close_task.delay(season_id=season_id)
    # Closed seasons whose Redis keys were never unlinked (a close-out stopped between its
    # commit and the unlink): run again, a close-out of a closed season only unlinks them.
    closed_before = timezone.now() - timedelta(seconds=_KEYS_RELEASE_GRACE_SECONDS)
    for season_id in seasons_keys_unreleased(closed_before=closed_before):
        season_close_task.delay(season_id=season_id)
    # Closed seasons whose history is not archived yet (just closed, or a crash mid-archive).
    for season_id in seasons_history_due():
        season_history_archive_task.delay(season_id=season_id)
    # Closed seasons whose season_final events are not on Kafka yet (a crash, Kafka away).
    for season_id in seasons_final_events_due():
        season_final_events_task.delay(season_id=season_id)
    return due


@shared_task(
    **_RETRIED,
    # The standings query reads every result of the season once: minutes at tens of millions.
    soft_time_limit=600,
    time_limit=660,
)
def season_close_task(*, season_id: int) -> str:
    # A short wait for the drain, not SEASON_CLOSE_DRAIN_TIMEOUT_SECONDS: a worker slot held for
    # minutes would stall the every-second top-list refresh. A season still lagging stays
    # closing, unfinalized, and the sweep (seasons_close_due_task, every minute) queues this
    # again: that is the retry, and never two retry chains per season.
    wait = min(settings.SEASON_CLOSE_DRAIN_TIMEOUT_SECONDS, _TASK_DRAIN_WAIT_SECONDS)
    # The sweep queued it as closing: one staff reopened since stays open.
    result = season_close(season_id=season_id, drain_timeout_seconds=wait, start_closing=False)
    if result.closed:
        season_history_archive_task.delay(season_id=season_id)
    return result.describe()


@shared_task(**_RETRIED)
def season_final_events_task(*, season_id: int) -> int:
    """Publish the closed season's season_final rank events not sent yet (events sent)."""
    return season_final_events_publish(season_id=season_id)


@shared_task(**QUICK_TASK)
def schedules_advance_task() -> list[int]:
    """Create the seasons every schedule has due (the ids of the seasons created)."""
    return list(schedules_advance().created)


@shared_task(
    **_RETRIED,
    # One INSERT ... SELECT per board: minutes at tens of millions of players.
    soft_time_limit=1800,
    time_limit=1860,
)
def season_history_archive_task(*, season_id: int) -> int:
    """Archive the closed season's boards not archived yet (rows written)."""
    return season_history_archive(season_id=season_id).rows


@shared_task(**{**QUICK_TASK, "soft_time_limit": 600, "time_limit": 660})
def history_prune_task() -> int:
    return history_prune()


@shared_task(**QUICK_TASK)
def match_results_prune_due_task() -> list[int]:
    """Queue the prune of every closed season past MATCH_RESULTS_RETENTION_DAYS (their ids)."""
    due = seasons_results_prune_due()
    for season_id in due:
        season_results_prune_task.delay(season_id=season_id)
    return due


@shared_task(
    **_RETRIED,
    # Batches of 10,000 rows: tens of millions of results take minutes. A season cut short
    # stays unmarked and the next hourly run deletes what is left.
    soft_time_limit=1800,
    time_limit=1860,
)
def season_results_prune_task(*, season_id: int) -> int:
    """Delete the closed season's match results and refused results (match results deleted)."""
    return season_results_prune(season_id=season_id).results
