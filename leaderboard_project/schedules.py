"""Every periodic task of the product, in one place.

``python manage.py setup_periodic_tasks`` writes these into django-celery-beat's tables (the
DatabaseScheduler reads them), so staff see and change schedules in the admin. To add a
periodic task, append one ``PeriodicTaskSpec`` below; nothing else needs to know.

Every periodic task is routine: it runs on the clock whether or not there is work, so Celery's
own INFO lines about each run (beat's "Sending due task", the worker's "received" and
"succeeded") are not logged (``ROUTINE_TASKS``, settings.LOG_QUIET_TASKS). A periodic task
says what it did from its service instead, at INFO or WARNING, and stays silent when there was
nothing to do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class PeriodicTaskSpec:
    name: str  # unique; the row in django_celery_beat's PeriodicTask
    task: str  # dotted name of the Celery task
    every_seconds: int
    kwargs: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    # A run older than this is dropped rather than run late (beat's "expires", in seconds).
    expires_seconds: int | None = None


# Queued once at every beat start too (leaderboard_project/celery.py): django-celery-beat 2.9
# runs an interval task first one interval after its row was created or last ran, which for
# the hourly reconcile could be an hour after a restart.
RECONCILE_TASK_NAME = "leaderboard: reconcile boards with PostgreSQL"


PERIODIC_TASKS: tuple[PeriodicTaskSpec, ...] = (
    PeriodicTaskSpec(
        name="seasons: sync statuses from dates",
        task="seasons.tasks.season_statuses_sync_task",
        every_seconds=10,
        description="scheduled -> active at starts_at, active -> closing at ends_at",
        expires_seconds=10,
    ),
    PeriodicTaskSpec(
        name="seasons: close out ended seasons",
        task="closeout.tasks.seasons_close_due_task",
        every_seconds=60,
        description="queues season_close for every season past its end and grace period",
        expires_seconds=60,
    ),
    PeriodicTaskSpec(
        name="seasons: prune players' history past its retention",
        task="closeout.tasks.history_prune_task",
        every_seconds=3600,
        description="deletes history of seasons ended HISTORY_RETENTION_DAYS ago, in batches",
        expires_seconds=3600,
    ),
    PeriodicTaskSpec(
        name="seasons: prune closed seasons' match results past their retention",
        task="closeout.tasks.match_results_prune_due_task",
        every_seconds=3600,
        description="deletes the results of seasons closed MATCH_RESULTS_RETENTION_DAYS ago",
        expires_seconds=3600,
    ),
    PeriodicTaskSpec(
        name="seasons: create the seasons schedules have due",
        task="closeout.tasks.schedules_advance_task",
        every_seconds=30,
        description="each schedule's next season, lead minutes before its occurrence",
        expires_seconds=30,
    ),
    PeriodicTaskSpec(
        name="leaderboard: refresh top-list snapshots",
        task="leaderboard.tasks.refresh_top_snapshots",
        every_seconds=1,
        description="each live season's top 1000, encoded once, for every API process to serve",
        expires_seconds=2,
    ),
    PeriodicTaskSpec(
        name="leaderboard: build weekly boards",
        task="leaderboard.tasks.build_weekly_boards",
        every_seconds=300,
        description="the current ISO week's board (last week's too on Mondays) from daily boards",
        expires_seconds=300,
    ),
    PeriodicTaskSpec(
        name=RECONCILE_TASK_NAME,
        task="leaderboard.tasks.boards_reconcile_task",
        every_seconds=3600,
        description=(
            "compares member counts and every score (sampled above RECONCILE_FULL_MAX_MEMBERS) "
            "of every live board, daily boards within their expiry too; rebuilds a drifted one. "
            "Also queued once whenever beat starts."
        ),
        expires_seconds=3600,
    ),
    PeriodicTaskSpec(
        name="leaderboard: recover boards Redis lost",
        task="leaderboard.tasks.boards_recover_task",
        every_seconds=5,
        description=(
            "rebuilds a board whose intact key or watermark is gone (season-long, daily, weekly) "
            "and reconciles every board after a Redis restart (new run id)"
        ),
        expires_seconds=5,
    ),
)


# The tasks whose per-run Celery lines are not logged (above): every periodic one.
ROUTINE_TASKS: tuple[str, ...] = tuple(dict.fromkeys(spec.task for spec in PERIODIC_TASKS))
