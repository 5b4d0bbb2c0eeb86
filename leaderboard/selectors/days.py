"""The UTC days a board has counted results on (its daily boards)."""

from __future__ import annotations

from datetime import date, datetime

from django.db import connection

from ._sql import board_params, counted_results_sql
from .boards import BoardRef


def board_days_with_results(*, board: BoardRef) -> list[date]:
    """The UTC days on which the board has counted results (the daily boards it has)."""
    sql = f"""
        SELECT DISTINCT (r.achieved_at AT TIME ZONE 'UTC')::date {counted_results_sql(day=None)}
        ORDER BY 1
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, board_params(board=board, day=None))
        return [row[0] for row in cursor.fetchall()]


def board_days_last_ingested(*, board: BoardRef) -> dict[date, datetime]:
    """The UTC days on which the board has counted results -> when the last of them was
    ingested (a late result written to an old day's board extends that board's expiry)."""
    sql = f"""
        SELECT (r.achieved_at AT TIME ZONE 'UTC')::date, max(r.ingested_at)
        {counted_results_sql(day=None)}
        GROUP BY 1
        ORDER BY 1
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, board_params(board=board, day=None))
        return {row[0]: row[1] for row in cursor.fetchall()}
