"""Celery tasks of the boards' maintenance. They take ids and call one service each."""

from __future__ import annotations

from datetime import date

from celery import shared_task

from leaderboard.services import RebuildInProgressError, board_rebuild


# A rebuild already running for the board is retried later rather than run twice at once.
@shared_task(
    name="leaderboard.tasks.board_rebuild_task",
    autoretry_for=(RebuildInProgressError, ConnectionError),
    retry_backoff=30,
    retry_kwargs={"max_retries": 5},
    soft_time_limit=1800,
    time_limit=1900,
    acks_late=True,
    ignore_result=True,
)
def board_rebuild_task(season_id: int, day: str | None = None, reason: str = "task") -> int:
    result = board_rebuild(
        season_id=season_id, day=date.fromisoformat(day) if day else None, reason=reason
    )
    return result.members
