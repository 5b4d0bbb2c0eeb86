"""Celery tasks of the boards' maintenance. They take ids and call one service each.

Periodic ones (scheduled in leaderboard_project/schedules.py):

- ``leaderboard.tasks.refresh_top_snapshots``: every second.
- ``leaderboard.tasks.build_weekly_boards``: every few minutes (the current week's board lags
  by at most that interval).
- ``leaderboard.tasks.boards_reconcile_task``: hourly, and once whenever beat starts
  (leaderboard_project/celery.py).
- ``leaderboard.tasks.boards_recover_task``: every few seconds, finds boards Redis lost (or a
  restarted Redis) and repairs them (leaderboard/services/recovery.py).
"""

from __future__ import annotations

from datetime import date
from typing import Any

from celery import shared_task
from django.db import InterfaceError, OperationalError
from django.utils import timezone
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from leaderboard.rank_events import RankEventsNotDelivered
from leaderboard.services import (
    CorrectionEventsPending,
    CorrectionSubject,
    RebuildInProgressError,
    SeasonClosedError,
    board_all_rebuild,
    board_rebuild,
    board_reconcile,
    boards_correct,
    boards_reconcile_live_seasons,
    boards_recover,
    rank_events_corrections_relay,
    top_snapshots_refresh,
    weekly_boards_build,
)

# Redis or PostgreSQL away for a moment. redis-py's connection errors are not the built-in
# ConnectionError: named alone, a Redis blip failed a staff-queued rebuild or correction for good.
_OUTAGES = (RedisConnectionError, RedisTimeoutError, OperationalError, InterfaceError)


# A rebuild already running for the board is retried later rather than run twice at once.
@shared_task(
    name="leaderboard.tasks.board_rebuild_task",
    autoretry_for=(RebuildInProgressError, *_OUTAGES),
    retry_backoff=30,
    retry_kwargs={"max_retries": 5},
    soft_time_limit=1800,
    time_limit=1900,
    acks_late=True,
    ignore_result=True,
)
def board_rebuild_task(board_id: int, day: str | None = None, reason: str = "task") -> str:
    """One day's board, or (no day) the season-long board with its daily and weekly boards."""
    try:
        if day:
            result = board_rebuild(board_id=board_id, day=date.fromisoformat(day), reason=reason)
            return f"board {board_id} day {day}: {result.members} players"
        return board_all_rebuild(board_id=board_id, reason=reason).describe()
    except SeasonClosedError as closed:
        return str(closed)


# Staff's reconcile of one board (the admin action): a repair rebuilds the board, which takes
# a minute at ten million players, so it runs here rather than in the web request.
@shared_task(
    name="leaderboard.tasks.board_reconcile_task",
    autoretry_for=_OUTAGES,
    retry_backoff=30,
    retry_kwargs={"max_retries": 5},
    soft_time_limit=1800,
    time_limit=1900,
    acks_late=True,
    ignore_result=True,
)
def board_reconcile_task(board_id: int) -> str:
    """Compare one board with PostgreSQL, record the run, and rebuild the board on drift."""
    try:
        result = board_reconcile(board_id=board_id)
    except SeasonClosedError as closed:
        return str(closed)
    if result.run_id is None:
        return f"board {board_id}: a rebuild is running; nothing compared"
    if not result.drift_found:
        return f"board {board_id}: matches PostgreSQL (reconcile run #{result.run_id})"
    repaired = "rebuilt" if result.rebuilt else "NOT rebuilt (a rebuild was running)"
    return f"board {board_id}: drift found (reconcile run #{result.run_id}), {repaired}"


# A one-second task must never queue up behind itself: a late run is worthless once the next
# one is due, so it expires instead of piling up.
@shared_task(name="leaderboard.tasks.refresh_top_snapshots", ignore_result=True, expires=2)
def refresh_top_snapshots() -> dict[int, int]:
    """Every second: each live board's top list, encoded once for every API process."""
    return top_snapshots_refresh()


@shared_task(name="leaderboard.tasks.build_weekly_boards", ignore_result=True)
def build_weekly_boards() -> dict[str, int]:
    return weekly_boards_build(now=timezone.now())


@shared_task(
    name="leaderboard.tasks.boards_reconcile_task",
    soft_time_limit=3000,
    time_limit=3300,
    acks_late=True,
    ignore_result=True,
)
def boards_reconcile_task() -> int:
    """Compare every live board with PostgreSQL (in full up to RECONCILE_FULL_MAX_MEMBERS
    players) and repair drift; returns the number of drifted boards."""
    results = boards_reconcile_live_seasons(now=timezone.now())
    return sum(1 for r in results if r.drift_found)


# Every few seconds: a late run is worthless once the next is due, so it expires instead of
# piling up behind a long recovery (which holds each board's lock, so runs never collide).
@shared_task(
    name="leaderboard.tasks.boards_recover_task",
    ignore_result=True,
    expires=5,
    soft_time_limit=1800,
    time_limit=1900,
)
def boards_recover_task() -> str:
    """Rebuild boards Redis lost; reconcile every board after a Redis restart."""
    return boards_recover().describe()


# A board being rebuilt may be reading a snapshot from before the correction: retry after it.
@shared_task(
    name="leaderboard.tasks.boards_correct_task",
    autoretry_for=(RebuildInProgressError, *_OUTAGES),
    retry_backoff=15,
    retry_kwargs={"max_retries": 10},
    soft_time_limit=3000,
    time_limit=3300,
    acks_late=True,
    ignore_result=True,
)
def boards_correct_task(
    season_id: int,
    days: list[str],
    board_ids: list[int] | None = None,
    subjects: list[dict[str, Any]] | None = None,
) -> str:
    """After a void or a ban: rebuild the season-long, daily and weekly boards it touched
    (``board_ids``: the boards concerned; None: every board of the season), with the rank
    events of the players it moves (``subjects``: CorrectionSubject.as_task_arg)."""
    try:
        result = boards_correct(
            season_id=season_id,
            days=[date.fromisoformat(d) for d in days],
            board_ids=board_ids,
            subjects=[CorrectionSubject.from_task_arg(s) for s in subjects or ()],
        )
    except CorrectionEventsPending as pending:
        # The rebuilds are done: only the events are retried, not the rebuilds.
        rank_events_corrections_relay_task.delay(board_ids=list(pending.board_ids))
        return f"{pending}: their relay is queued"
    return result.describe()


# Kafka away: the events wait in the boards' corrections outboxes (the close-out sends them
# too before it drops a season's keys), retried with backoff for about a day.
@shared_task(
    name="leaderboard.tasks.rank_events_corrections_relay_task",
    autoretry_for=(RankEventsNotDelivered, *_OUTAGES),
    retry_backoff=15,
    retry_backoff_max=3600,
    retry_kwargs={"max_retries": 30},
    acks_late=True,
    ignore_result=True,
)
def rank_events_corrections_relay_task(board_ids: list[int]) -> str:
    """Publish what the boards' corrections outboxes hold (rank_changed of corrections)."""
    sent = rank_events_corrections_relay(board_ids=board_ids)
    return f"{sent} correction event(s) of board(s) {board_ids} published"
