"""Which and how many players a board holds per PostgreSQL: what a reconcile checks Redis
against."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime

from django.db import connection

from ..codec import TIEBREAK_VALUE_MAX
from ..models import ScoringRule
from ._sql import COVERED, RESULTS, board_params, counted_results_sql
from .boards import BoardRef


def _sums_fit(board: BoardRef, *, covered: bool = False) -> str:
    """SQL: true when a player's cumulative values fit the board's key (scored_sql leaves a
    player whose sum does not fit off the board, and so does the apply script): the points
    within the codec's maximum, or on a board with tie-break columns the points and every
    column's sum within TIEBREAK_VALUE_MAX (the codec's own maximum plays no part there)."""
    only = f" FILTER (WHERE {COVERED})" if covered else ""
    if board.wide_codec is None:
        return f"SUM(r.points){only} <= %(max_points)s"
    values = ["r.points", *(f"r.tiebreakers[{i + 1}]" for i in range(len(board.tiebreaks)))]
    return " AND ".join(f"SUM({v}){only} <= {TIEBREAK_VALUE_MAX}" for v in values)


def board_member_count(*, board: BoardRef, day: date | None = None) -> int:
    """How many players the board has: players with at least one counted result, less those
    whose cumulative points overflow the codec (a rebuild leaves them off)."""
    sql = f"SELECT COUNT(DISTINCT r.player_id) {counted_results_sql(day=day)}"
    if board.rule == ScoringRule.CUMULATIVE:
        sql = f"""
            SELECT COUNT(*) FROM (
                SELECT r.player_id {counted_results_sql(day=day)}
                GROUP BY r.player_id HAVING {_sums_fit(board)}
            ) p
        """  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(sql, board_params(board=board, day=day))
        row = cursor.fetchone()
    return int(row[0]) if row else 0


@dataclass(frozen=True, slots=True)
class MemberCounts:
    """How many players a board must hold, counting what its watermark covers (``covered``)
    and everything stored (``stored``): a board between the two is consistent, the difference
    being results stored but not yet applied."""

    covered: int
    stored: int


def board_member_counts(
    *, board: BoardRef, applied: Mapping[int, int], day: date | None = None
) -> MemberCounts:
    """``board_member_count`` over the results ``applied`` covers, and over all of them, from
    one snapshot (one scan of the board's rows)."""
    counted = counted_results_sql(day=day)
    if board.rule == ScoringRule.CUMULATIVE:
        sql = f"""
            SELECT COUNT(*) FILTER (WHERE p.covered_count > 0 AND p.covered_fits),
                   COUNT(*) FILTER (WHERE p.fits)
            FROM (
                SELECT COUNT(*) FILTER (WHERE {COVERED}) AS covered_count,
                       {_sums_fit(board, covered=True)} AS covered_fits,
                       {_sums_fit(board)} AS fits
                {counted}
                GROUP BY r.player_id
            ) p
        """  # noqa: S608
    else:
        sql = f"""
            SELECT COUNT(DISTINCT r.player_id) FILTER (WHERE {COVERED}),
                   COUNT(DISTINCT r.player_id)
            {counted}
        """
    with connection.cursor() as cursor:
        cursor.execute(sql, board_params(board=board, day=day, applied=applied))
        row = cursor.fetchone()
    return MemberCounts(covered=int(row[0]), stored=int(row[1])) if row else MemberCounts(0, 0)


def board_players_uncovered(
    *,
    board: BoardRef,
    player_ids: Sequence[int],
    applied: Mapping[int, int],
    day: date | None = None,
) -> set[int]:
    """Those of ``player_ids`` with a counted result stored above the watermark ``applied``:
    ingestion has stored it and may apply it at any moment (or a rebuild's snapshot already
    counted it), so what Redis holds of these players is not yet decided by the watermark.
    Reads the players' rows through the board's player index."""
    if not player_ids:
        return set()
    sql = f"""
        SELECT DISTINCT r.player_id {counted_results_sql(day=day)}
          AND r.player_id = ANY(%(players)s)
          AND NOT {COVERED}
    """
    params = board_params(board=board, day=day, applied=applied) | {
        "players": [int(p) for p in player_ids]
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {int(row[0]) for row in cursor.fetchall()}


def board_players_ingested_since(
    *, board: BoardRef, since: datetime, day: date | None = None, limit: int
) -> list[int]:
    """Up to ``limit`` players with a counted result ingested at or after ``since``: the players
    whose last writes a Redis restart may have taken with it. Reads the board's rows (no index
    carries ingested_at); run after a restart only, not every few seconds."""
    sql = f"""
        SELECT DISTINCT r.player_id {counted_results_sql(day=day)}
          AND r.ingested_at >= %(since)s
        LIMIT %(limit)s
    """
    params = board_params(board=board, day=day) | {"since": since, "limit": limit}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [int(row[0]) for row in cursor.fetchall()]


# Random starting points drawn per sampled player: duplicates (two starts landing before the
# same player) collapse, so draw more than needed and keep the first ``size`` distinct ones.
_SAMPLE_DRAWS_PER_PLAYER = 4


def board_players_sample(*, board: BoardRef, size: int, day: date | None = None) -> list[int]:
    """Up to ``size`` random players that have a counted result (reconcile's sample).

    Scales with the sample, not the board: random player ids are drawn between the board's
    lowest and highest player id (two index lookups), and each draw takes the first counted
    player at or above it through match_result_board_player_idx (board, player_id, ...), so no
    query reads or sorts every result. Players after a gap in the ids are drawn more often;
    every counted player has a chance, which is what a drift check needs.
    """
    draw = f"""
        SELECT r.player_id {counted_results_sql(day=day)}
          AND r.player_id >= g.start
        ORDER BY r.player_id
        LIMIT 1
    """
    sql = f"""
        WITH bounds AS (
            SELECT MIN(player_id) AS lo, MAX(player_id) AS hi FROM {RESULTS}
            WHERE board_id = %(board_id)s
        ), starts AS (
            SELECT b.lo + FLOOR(random() * (b.hi - b.lo + 1))::bigint AS start
            FROM bounds b, generate_series(1, %(draws)s)
            WHERE b.lo IS NOT NULL
        )
        SELECT DISTINCT picked.player_id
        FROM starts g CROSS JOIN LATERAL ({draw}) picked
        LIMIT %(size)s
    """  # noqa: S608
    params = board_params(board=board, day=day) | {
        "size": int(size),
        "draws": int(size) * _SAMPLE_DRAWS_PER_PLAYER,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [int(row[0]) for row in cursor.fetchall()]
