"""The SQL of a board's counted results and scores, shared by the PostgreSQL reads.

The aggregation here is the definition a rebuild and a reconcile hold Redis to, so it follows
the score semantics of the live apply exactly:

- ``best``: the best points for the board's order (highest for ``desc``, lowest for ``asc``),
  at the EARLIEST time they were reached;
- ``latest``: the points of the latest result (by achieved_at; an exact tie goes to the greater
  match id), at that result's time;
- ``cumulative``: the sum of points, at the LATEST result's time;
- over counted results only: not voided, and the player not banned from the season;
- a daily board (``day``) counts only results achieved on that UTC day; ticks still run from
  the season's start.

The encoded score is computed in SQL, with the codec's own arithmetic (floored ticks from
exact numeric epoch seconds), so 10M rows cross into Python as ready-made ZADD arguments.

The SQL is assembled from constant fragments only (S608 is silenced per line for that reason);
every value is a bound parameter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from ..codec import TIEBREAK_VALUE_MAX
from ..models import MatchResult, PlayerBan, ScoringRule
from .boards import BoardRef

RESULTS = MatchResult._meta.db_table
BANS = PlayerBan._meta.db_table


# A stored result the board's applied-offset watermark covers (``%(applied)s``: the watermark
# as a dense array, element p + 1 = the highest offset of partition p on the board). A result
# stored without a Kafka offset was never the consumer's to apply: it counts as covered.
COVERED = """(r.kafka_partition IS NULL
    OR r.kafka_offset <= COALESCE((%(applied)s::bigint[])[r.kafka_partition + 1], -1))"""


def counted_results_sql(*, day: date | None, covered_only: bool = False) -> str:
    day_filter = "AND r.achieved_at >= %(day_start)s AND r.achieved_at < %(day_end)s" if day else ""
    covered = f"AND {COVERED}" if covered_only else ""
    return f"""
        FROM {RESULTS} r
        WHERE r.board_id = %(board_id)s
          AND r.voided_at IS NULL
          {day_filter}
          {covered}
          AND NOT EXISTS (
              SELECT 1 FROM {BANS} b
              WHERE b.season_id = r.season_id AND b.player_id = r.player_id
          )
    """  # noqa: S608


# A player's one result that holds the board, per rule (DISTINCT ON keeps the first).
_ONE_RESULT_ORDER: dict[tuple[str, str], str] = {
    # Reads match_result_board_player_idx (board, player_id, -points, achieved_at) in order,
    # index only.
    (ScoringRule.BEST, "desc"): "r.player_id, r.points DESC, r.achieved_at",
    # The same index, sorted within each player (an incremental sort).
    (ScoringRule.BEST, "asc"): "r.player_id, r.points ASC, r.achieved_at",
    # The latest result; an exact tie on achieved_at goes to the greater match id, so every
    # replay and every rebuild agrees with ingestion (latest_results_get).
    (ScoringRule.LATEST, "desc"): "r.player_id, r.achieved_at DESC, r.match_id DESC",
    (ScoringRule.LATEST, "asc"): "r.player_id, r.achieved_at DESC, r.match_id DESC",
}


def _wide_per_player_sql(*, board: BoardRef, counted: str) -> str:
    """``_per_player_sql`` of a board with tie-break columns, plus the values of its columns
    (``tiebreakers``, in the board's order): the best is the best whole key, at the earliest
    time it was reached; cumulative sums every column."""
    n = len(board.tiebreaks)
    if board.rule == ScoringRule.CUMULATIVE:
        sums = ", ".join(f"SUM(r.tiebreakers[{i + 1}])" for i in range(n))
        return f"""
            SELECT r.player_id, SUM(r.points) AS points, MAX(r.achieved_at) AS achieved_at,
                   ARRAY[{sums}]::bigint[] AS tiebreakers
            {counted}
            GROUP BY r.player_id
        """
    if board.rule == ScoringRule.BEST:
        columns = ", ".join(
            f"r.tiebreakers[{i + 1}] {'ASC' if c.ascending else 'DESC'}"
            for i, c in enumerate(board.tiebreaks)
        )
        order = (
            f"r.player_id, r.points {'ASC' if board.ascending else 'DESC'}, {columns}, "
            "r.achieved_at"
        )
    else:
        order = _ONE_RESULT_ORDER[(board.rule, board.order)]
    return f"""
        SELECT DISTINCT ON (r.player_id) r.player_id, r.points, r.achieved_at,
               r.tiebreakers::bigint[] AS tiebreakers
        {counted}
        ORDER BY {order}
    """


def _hex8(value: str, ascending: bool) -> str:
    """One value of a wide key (leaderboard/codec.py WideKeyCodec) in SQL."""
    stored = value if ascending else f"({TIEBREAK_VALUE_MAX} - {value})"
    return f"lpad(to_hex(({stored})::bigint), 8, '0')"


def _per_player_sql(
    *, board: BoardRef, day: date | None, player_filter: str = "", covered_only: bool = False
) -> str:
    """One row per player: player_id, points, achieved_at (the time that counts); on a board
    with tie-break columns, then their values (tiebreakers)."""
    counted = counted_results_sql(day=day, covered_only=covered_only) + player_filter
    if board.tiebreaks:
        return _wide_per_player_sql(board=board, counted=counted)
    if board.rule != ScoringRule.CUMULATIVE:
        return f"""
            SELECT DISTINCT ON (r.player_id) r.player_id, r.points, r.achieved_at
            {counted}
            ORDER BY {_ONE_RESULT_ORDER[(board.rule, board.order)]}
        """
    return f"""
        SELECT r.player_id, SUM(r.points) AS points, MAX(r.achieved_at) AS achieved_at
        {counted}
        GROUP BY r.player_id
    """


def scored_sql(
    *, board: BoardRef, day: date | None, player_filter: str = "", covered_only: bool = False
) -> str:
    """player_id, points, achieved_at, score (NULL when cumulative points overflow the codec).

    On a board with tie-break columns the score is the wide key as text (NULL when a cumulative
    value passes TIEBREAK_VALUE_MAX), and a fifth column holds the tie-break values."""
    inner = _per_player_sql(
        board=board, day=day, player_filter=player_filter, covered_only=covered_only
    )
    # Same as ScoreCodec.ticks: whole ticks of exact (numeric) elapsed seconds, floored.
    ticks = (
        "FLOOR((EXTRACT(EPOCH FROM p.achieved_at) - EXTRACT(EPOCH FROM %(starts_at)s::timestamptz))"
        " / %(resolution)s)::bigint"
    )
    wide = board.wide_codec
    if wide is not None:
        values = ["p.points", *(f"p.tiebreakers[{i + 1}]" for i in range(wide.columns))]
        key = " || ".join(
            [
                *(_hex8(v, a) for v, a in zip(values, wide.ascending, strict=True)),
                f"lpad(to_hex({ticks}), {wide.tick_digits}, '0')",
            ]
        )
        too_large = " OR ".join(f"{v} > {TIEBREAK_VALUE_MAX}" for v in values)
        return f"""
            SELECT p.player_id, p.points, p.achieved_at,
                   CASE WHEN {too_large} THEN NULL ELSE {key} END AS score,
                   p.tiebreakers
            FROM ({inner}) p
        """  # noqa: S608
    # Same as ScoreCodec.encode: an asc board stores max_points - points in the high bits.
    high = "(%(max_points)s - p.points)" if board.ascending else "p.points"
    return f"""
        SELECT p.player_id, p.points, p.achieved_at,
               CASE WHEN p.points > %(max_points)s THEN NULL
                    ELSE {high}::bigint * %(scale)s + (%(max_ticks)s - {ticks})
               END AS score
        FROM ({inner}) p
    """  # noqa: S608


def _applied_array(applied: Mapping[int, int]) -> list[int]:
    """A watermark (partition -> highest applied offset) as the dense array COVERED reads."""
    size = max(applied, default=-1) + 1
    return [applied.get(partition, -1) for partition in range(size)]


def board_params(
    *, board: BoardRef, day: date | None, applied: Mapping[int, int] | None = None
) -> dict[str, Any]:
    codec = board.codec
    params: dict[str, Any] = {
        "board_id": board.id,
        "starts_at": board.season.starts_at,
        "resolution": codec.resolution_seconds,
        "max_points": codec.max_points,
        "max_ticks": codec.max_ticks,
        "scale": 1 << codec.time_bits,
    }
    if day is not None:
        start = datetime.combine(day, time(0), tzinfo=UTC)
        params["day_start"] = start
        params["day_end"] = start + timedelta(days=1)
    if applied is not None:
        params["applied"] = _applied_array(applied)
    return params


def array_literal(values: Sequence[int | None]) -> str:
    """``values`` as a PostgreSQL array literal (``{1,2,NULL}``): a few thousand integers go in
    several times faster as one text value than as a list psycopg adapts element by element."""
    return "{" + ",".join("NULL" if v is None else str(int(v)) for v in values) + "}"
