"""Every player's history: their final entry on every board of every closed season.

The close-out freezes the top FINAL_STANDINGS_SIZE of each board in one transaction with the
season's status; the history holds everyone, millions of rows a board, so it is archived after
that transaction commits, board by board, each in a transaction of its own that writes its rows
with one set-based ``INSERT ... SELECT`` (the ranking runs inside PostgreSQL, from the same
results the standings come from) together with the board's ``HistoryArchive`` marker. The
close-out's sweep (closeout/tasks.py) archives every closed board without a marker: after a
crash, the board's work is redone whole, never twice. Ranks are the standings' ranks (the
board's order, then the lower player id on an exact tie) and the reward is the player's grant;
on a league board, each row also carries the tier the player played in and their movement
(decided by the close-out: closeout/services/leagues.py).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone

from leaderboard.models import Board, LeagueMovement
from leaderboard.selectors.boards import BoardRef, board_list
from leaderboard.selectors.scores import board_ranks_sql
from seasons.models import Season, SeasonStatus

from ..models import GrantStatus, HistoryArchive, HistoryEntry, RewardGrant

logger = logging.getLogger(__name__)

# Rows deleted per statement when pruning: short transactions, no long lock on the table.
PRUNE_BATCH = 10_000


@dataclass(frozen=True, slots=True)
class HistoryArchived:
    season_id: int
    boards: int  # archived now
    rows: int
    seconds: float


def season_history_archive(*, season_id: int) -> HistoryArchived:
    """Archive every board of a closed season not archived yet (none twice)."""
    season = Season.objects.filter(id=season_id).first()
    if season is None:
        raise ValidationError(f"season {season_id} does not exist")
    if season.status != SeasonStatus.CLOSED:
        raise ValidationError(
            f"season {season_id} is {season.status}: history is archived once closed"
        )
    if season.results_pruned_at is not None:
        # Archived from the results, which are gone: it would archive an empty history.
        raise ValidationError(
            f"season {season_id}'s match results were pruned on "
            f"{season.results_pruned_at:%Y-%m-%d}: its history can no longer be archived"
        )
    started = time.monotonic()
    boards = rows = 0
    for board in board_list(season_id=season_id):
        archived = board_history_archive(board=board, season_ends_at=season.ends_at)
        if archived is not None:
            boards += 1
            rows += archived
    result = HistoryArchived(season_id, boards, rows, time.monotonic() - started)
    if boards:
        logger.info(
            "season %s: history of %d players archived over %d boards in %.1f s",
            season_id,
            rows,
            boards,
            result.seconds,
        )
    return result


def board_history_archive(*, board: BoardRef, season_ends_at: datetime) -> int | None:
    """The board's rows, written with its marker in one transaction; None if archived already
    (or being archived by another process right now)."""
    started = time.monotonic()
    with transaction.atomic():
        # A second archiver of the board (the next sweep while a large board is still being
        # archived) leaves it to the first rather than hold a worker waiting for it.
        if Board.objects.select_for_update(skip_locked=True).filter(id=board.id).first() is None:
            return None
        if HistoryArchive.objects.filter(board_id=board.id).exists():
            return None
        ranks, params = board_ranks_sql(board=board)
        # A league board's rows carry the tier each player played in and their movement.
        league_columns, league_join = "NULL, NULL", ""
        if board.tiers:
            league_columns = "(%(history_tiers)s::text[])[mv.tier + 1], mv.movement"
            league_join = f"""
                LEFT JOIN {LeagueMovement._meta.db_table} mv
                       ON mv.board_id = %(history_board)s AND mv.player_id = r.player_id
            """
        sql = f"""
            INSERT INTO {HistoryEntry._meta.db_table}
                (season_id, board_id, player_id, rank, points, total, reward_name,
                 reward_quantity, season_ends_at, tier, movement)
            SELECT %(history_season)s, %(history_board)s, r.player_id, r.rank, r.points, r.total,
                   g.reward_name, g.quantity, %(history_ends_at)s, {league_columns}
            FROM ({ranks}) r
            LEFT JOIN {RewardGrant._meta.db_table} g
                   ON g.board_id = %(history_board)s AND g.player_id = r.player_id
                  AND g.status <> %(history_revoked)s
            {league_join}
            -- In player order, the indexes led by the player grow at their end instead of at
            -- random places: 10,000,000 rows in a third of the time (docs/benchmarks.md).
            ORDER BY r.player_id
        """  # noqa: S608
        with connection.cursor() as cursor:
            cursor.execute(
                sql,
                params
                | {
                    "history_season": board.season_id,
                    "history_board": board.id,
                    "history_ends_at": season_ends_at,
                    "history_tiers": list(board.tiers),
                    # A grant a correction or staff revoked is no reward of the player's.
                    "history_revoked": GrantStatus.REVOKED,
                },
            )
            rows = max(cursor.rowcount, 0)
        HistoryArchive.objects.create(
            board_id=board.id,
            season_id=board.season_id,
            rows=rows,
            seconds=time.monotonic() - started,
        )
    return rows


def season_history_forget(*, season_id: int) -> int:
    """Drop the season's archived history and its markers, in the caller's transaction, so the
    close-out's sweep (every minute) archives it again from the results as they are then: a
    standings correction (a void, a ban) moves every rank below it. Rows dropped."""
    rows, _ = HistoryEntry.objects.filter(season_id=season_id).delete()
    HistoryArchive.objects.filter(season_id=season_id).delete()
    return rows


def seasons_history_due(*, now: datetime | None = None) -> list[int]:
    """Closed seasons within the retention with a board whose history is not archived."""
    now = now or timezone.now()
    oldest = now - timedelta(days=settings.HISTORY_RETENTION_DAYS)
    return list(
        Season.objects.filter(
            status=SeasonStatus.CLOSED,
            ends_at__gte=oldest,
            results_pruned_at__isnull=True,
            boards__history_archive__isnull=True,
        )
        .distinct()
        .order_by("id")
        .values_list("id", flat=True)
    )


def history_prune(*, now: datetime | None = None, batch: int = PRUNE_BATCH) -> int:
    """Delete the history of seasons that ended more than HISTORY_RETENTION_DAYS ago, ``batch``
    rows per transaction; how many rows went."""
    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.HISTORY_RETENTION_DAYS)
    table = HistoryEntry._meta.db_table
    deleted = 0
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                f"""
                DELETE FROM {table} WHERE id IN (
                    SELECT id FROM {table} WHERE season_ends_at < %(cutoff)s LIMIT %(batch)s
                )
                """,  # noqa: S608
                {"cutoff": cutoff, "batch": batch},
            )
            count = max(cursor.rowcount, 0)
        deleted += count
        if count < batch:
            break
    if deleted:
        logger.info("history: pruned %d entries of seasons ended before %s", deleted, cutoff)
    return deleted
