"""Match results of closed seasons past their retention: deleted, in short batches.

Every stored result is the truth boards are rebuilt from while their season runs. Once a season
is closed, what players and staff read of it is kept apart from the results: the final
standings, the grants, every player's history and the league movements (each written from the
results by the close-out and the history archive). The results themselves are then needed only
by a correction that re-ranks the closed season (a void or a ban reviewed in the admin,
services/standings.py), for MATCH_RESULTS_RETENTION_DAYS after the close-out. Past that window a
season's results, and the results its tournament boards refused, are deleted: kept for good, they
grow the primary's disk by every result ever played (docs/scaling.md).

A season past the window is final from that moment on, whether its rows are gone yet or not:
the standings review refuses it (``season_results_retained_require``), so a review never reads
a half-deleted season. Its history must be archived first (a board whose archive a crash left
owed is archived by the close-out's sweep within a minute; a season older than the history's own
retention is never archived again, so it does not wait). Rows go ``batch`` at a time, each batch
its own transaction through the results' (board, player, ...) index: no long lock, and ingestion
of live seasons goes on beside it. ``Season.results_pruned_at`` marks a season done; a crash
mid-way leaves it unmarked and the next run deletes what is left.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from leaderboard.models import Board, MatchResult, RefusedResult
from seasons.models import Season, SeasonStatus

from .history import PRUNE_BATCH

logger = logging.getLogger(__name__)

# Each table's rows of one board, ``batch`` at a time, found through the index that leads with
# the board (the results' and the refused results' own).
_DELETE_SQL = """
    DELETE FROM {table} WHERE id IN (
        SELECT id FROM {table} WHERE board_id = %(board)s LIMIT %(batch)s
    )
"""
_TABLES = (MatchResult._meta.db_table, RefusedResult._meta.db_table)


@dataclass(frozen=True, slots=True)
class ResultsPruned:
    season_id: int
    results: int  # match results deleted by this run
    refused: int  # refused results deleted by this run


def results_retention_cutoff(*, now: datetime) -> datetime | None:
    """Seasons closed before this are past the results' retention (None: kept for good)."""
    days = settings.MATCH_RESULTS_RETENTION_DAYS
    return None if days == 0 else now - timedelta(days=days)


def season_results_retained_require(*, season: Season, now: datetime | None = None) -> None:
    """Raise ValidationError when the closed season's results are past their retention (pruned,
    or about to be): nothing can be recomputed from them any more."""
    cutoff = results_retention_cutoff(now=now or timezone.now())
    past = cutoff is not None and season.closed_at is not None and season.closed_at < cutoff
    if season.results_pruned_at is not None or past:
        raise ValidationError(
            f"season {season.id} closed on {season.closed_at:%Y-%m-%d}, more than "
            f"MATCH_RESULTS_RETENTION_DAYS ({settings.MATCH_RESULTS_RETENTION_DAYS}) ago: its "
            "match results are pruned, so its final standings and grants are final"
        )


def seasons_results_prune_due(*, now: datetime | None = None) -> list[int]:
    """Closed seasons past the results' retention, not pruned yet, whose history is archived
    (or will never be: older than the history's own retention)."""
    now = now or timezone.now()
    cutoff = results_retention_cutoff(now=now)
    if cutoff is None:
        return []
    unarchived = Board.objects.filter(history_archive__isnull=True).values("season_id")
    return list(
        Season.objects.filter(
            status=SeasonStatus.CLOSED, closed_at__lt=cutoff, results_pruned_at__isnull=True
        )
        .filter(~Q(id__in=unarchived) | Q(ends_at__lt=_history_oldest(now=now)))
        .order_by("closed_at", "id")
        .values_list("id", flat=True)
    )


def _history_oldest(*, now: datetime) -> datetime:
    """Seasons that ended before this are never archived again (the history's own retention)."""
    return now - timedelta(days=settings.HISTORY_RETENTION_DAYS)


def season_results_prune_check(*, season_id: int, now: datetime | None = None) -> None:
    """Raise ValidationError saying why the season's results may not be pruned now: it does not
    exist, is not closed, is inside the retention, or its history is not archived yet (the
    archive is read from the results: pruned first, every player's history of it is lost)."""
    now = now or timezone.now()
    season = Season.objects.filter(id=season_id).first()
    if season is None:
        raise ValidationError(f"season {season_id} does not exist")
    cutoff = results_retention_cutoff(now=now)
    if season.status != SeasonStatus.CLOSED or cutoff is None or not season.closed_at:
        raise ValidationError(f"season {season_id} is {season.status}: its results are kept")
    if season.closed_at >= cutoff:
        raise ValidationError(
            f"season {season_id} closed on {season.closed_at:%Y-%m-%d}: its results are kept "
            f"until MATCH_RESULTS_RETENTION_DAYS ({settings.MATCH_RESULTS_RETENTION_DAYS}) after"
        )
    unarchived = list(
        Board.objects.filter(season_id=season_id, history_archive__isnull=True)
        .order_by("id")
        .values_list("slug", flat=True)
    )
    if unarchived and season.ends_at >= _history_oldest(now=now):
        raise ValidationError(
            f"season {season_id}'s history is not archived yet (boards {', '.join(unarchived)}):"
            " its results are kept until it is (the close-out's sweep archives it within a "
            "minute)"
        )


def season_results_prune(
    *,
    season_id: int,
    batch: int = PRUNE_BATCH,
    progress: Callable[[int, int], None] | None = None,
) -> ResultsPruned:
    """Delete the season's match results and refused results, ``batch`` rows per transaction,
    then mark it pruned; ValidationError, deleting nothing, when it is not due
    (``season_results_prune_check``: the caller may name any season). ``progress(results,
    refused)`` is called after every batch with the totals so far."""
    season_results_prune_check(season_id=season_id)
    deleted = [0, 0]
    for board_id in (
        Board.objects.filter(season_id=season_id).order_by("id").values_list("id", flat=True)
    ):
        for index, table in enumerate(_TABLES):
            while True:
                with transaction.atomic(), connection.cursor() as cursor:
                    cursor.execute(
                        _DELETE_SQL.format(table=table), {"board": board_id, "batch": batch}
                    )
                    count = max(cursor.rowcount, 0)
                deleted[index] += count
                if count and progress is not None:
                    progress(deleted[0], deleted[1])
                if count < batch:
                    break
    Season.objects.filter(id=season_id).update(results_pruned_at=timezone.now())
    logger.info(
        "season %d: pruned %d match results and %d refused results past their retention",
        season_id,
        deleted[0],
        deleted[1],
    )
    return ResultsPruned(season_id=season_id, results=deleted[0], refused=deleted[1])
