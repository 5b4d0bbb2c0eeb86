"""Reads over match results: each player's score on a board, computed from PostgreSQL.

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

import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from itertools import pairwise
from typing import Any

from django.db import connection
from django.db.models import QuerySet

from .codec import BIGINT_MAX, CodecError
from .models import Board, MatchResult, PlayerBan, ScoringRule
from .selectors import BoardRef

_RESULTS = MatchResult._meta.db_table
_BANS = PlayerBan._meta.db_table

# Server-side cursor batch: large enough to amortise round trips, small enough to stream.
DEFAULT_CHUNK_ROWS = 20_000


@dataclass(frozen=True, slots=True)
class BoardScore:
    player_id: int
    points: int
    # The time that places the player among equal points: the earliest time the best value was
    # reached (best), the latest result's (latest, cumulative).
    achieved_at: datetime
    score: int


# A stored result the board's applied-offset watermark covers (``%(applied)s``: the watermark
# as a dense array, element p + 1 = the highest offset of partition p on the board). A result
# stored without a Kafka offset was never the consumer's to apply: it counts as covered.
_COVERED = """(r.kafka_partition IS NULL
    OR r.kafka_offset <= COALESCE((%(applied)s::bigint[])[r.kafka_partition + 1], -1))"""


def _counted_results_sql(*, day: date | None, covered_only: bool = False) -> str:
    day_filter = "AND r.achieved_at >= %(day_start)s AND r.achieved_at < %(day_end)s" if day else ""
    covered = f"AND {_COVERED}" if covered_only else ""
    return f"""
        FROM {_RESULTS} r
        WHERE r.board_id = %(board_id)s
          AND r.voided_at IS NULL
          {day_filter}
          {covered}
          AND NOT EXISTS (
              SELECT 1 FROM {_BANS} b
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


def _per_player_sql(
    *, board: BoardRef, day: date | None, player_filter: str = "", covered_only: bool = False
) -> str:
    """One row per player: player_id, points, achieved_at (the time that counts)."""
    counted = _counted_results_sql(day=day, covered_only=covered_only) + player_filter
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


def _scored_sql(
    *, board: BoardRef, day: date | None, player_filter: str = "", covered_only: bool = False
) -> str:
    """player_id, points, achieved_at, score (NULL when cumulative points overflow the codec)."""
    inner = _per_player_sql(
        board=board, day=day, player_filter=player_filter, covered_only=covered_only
    )
    # Same as ScoreCodec.encode: an asc board stores max_points - points in the high bits.
    high = "(%(max_points)s - p.points)" if board.ascending else "p.points"
    # Same as ScoreCodec.ticks: whole ticks of exact (numeric) elapsed seconds, floored.
    ticks = (
        "FLOOR((EXTRACT(EPOCH FROM p.achieved_at) - EXTRACT(EPOCH FROM %(starts_at)s::timestamptz))"
        " / %(resolution)s)::bigint"
    )
    return f"""
        SELECT p.player_id, p.points, p.achieved_at,
               CASE WHEN p.points > %(max_points)s THEN NULL
                    ELSE {high}::bigint * %(scale)s + (%(max_ticks)s - {ticks})
               END AS score
        FROM ({inner}) p
    """  # noqa: S608


def _applied_array(applied: Mapping[int, int]) -> list[int]:
    """A watermark (partition -> highest applied offset) as the dense array _COVERED reads."""
    size = max(applied, default=-1) + 1
    return [applied.get(partition, -1) for partition in range(size)]


def _params(
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


def _overflow(board: BoardRef, player_id: object) -> CodecError:
    return CodecError(
        f"board {board.id} ({board.slug} of season {board.season_id}): cumulative points of "
        f"player {player_id!s} exceed the codec maximum {board.codec.max_points}"
    )


def _board_score(board: BoardRef, row: tuple[Any, ...]) -> BoardScore:
    player_id, points, achieved_at, score = row
    if score is None:
        raise _overflow(board, player_id)
    return BoardScore(int(player_id), int(points), achieved_at, int(score))


def board_scores_chunks(
    *,
    board: BoardRef,
    day: date | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    applied: Mapping[int, int] | None = None,
) -> Iterator[list[BoardScore]]:
    """Every counted player's board score, in chunks, through a server-side cursor.

    ``applied`` (a board's watermark): over the results it covers only, i.e. what Redis must
    hold of the board whatever ingestion has stored but not yet applied.

    Runs in the caller's transaction when there is one (a rebuild reads in its snapshot).
    """
    sql = _scored_sql(board=board, day=day, covered_only=applied is not None)
    params = _params(board=board, day=day, applied=applied)
    with connection.chunked_cursor() as cursor:
        cursor.execute(sql, params)
        while rows := cursor.fetchmany(chunk_rows):
            yield [_board_score(board, row) for row in rows]


def board_scores_zadd_chunks(
    *,
    board: BoardRef,
    day: date | None = None,
    chunk_bytes: int = 1 << 20,
    overflowed: list[int] | None = None,
    sorted_runs: int | None = None,
) -> Iterator[list[bytes]]:
    """The board as flat ZADD arguments ``[score, member, score, member, ...]`` in chunks.

    The bulk path of a rebuild: COPY streams the rows as text, and splitting the text gives
    the Redis arguments with no per-row Python work. Runs in the caller's transaction.

    Without ``sorted_runs`` the rows come in player order. With it, the players are split into
    about that many ranges of player ids, and each range comes sorted by score, highest first:
    Redis inserts neighbouring scores into a sorted set far faster than scattered ones (its
    skiplist walks stay in cache; docs/benchmarks.md, "Rebuild"), and PostgreSQL sorts one range
    while the caller loads the previous one.

    A player whose cumulative points overflow the codec raises CodecError, unless
    ``overflowed`` is given: then the player is left out and their id appended to it.
    """
    params = _params(board=board, day=day)
    if sorted_runs is None:
        inner = _scored_sql(board=board, day=day)
        sql = (
            f"COPY (SELECT COALESCE(score::text, 'OVERFLOW'), player_id FROM ({inner}) s) TO STDOUT"  # noqa: S608
        )
        yield from _copy_chunks(sql, params, board, chunk_bytes, overflowed)
        return
    inner = _scored_sql(
        board=board,
        day=day,
        player_filter="AND r.player_id >= %(run_low)s AND r.player_id < %(run_high)s",
    )
    sql = f"""
        COPY (SELECT COALESCE(score::text, 'OVERFLOW'), player_id FROM ({inner}) s
              ORDER BY s.score DESC NULLS FIRST) TO STDOUT
    """  # noqa: S608
    with connection.cursor() as cursor:
        # Each run is sorted in memory; the setting ends with the caller's transaction.
        cursor.execute("SELECT set_config('work_mem', %s, true)", [SORTED_RUN_WORK_MEM])
    for low, high in player_id_runs(board=board, day=day, runs=sorted_runs):
        run_params = params | {"run_low": low, "run_high": high}
        yield from _copy_chunks(sql, run_params, board, chunk_bytes, overflowed)


# Memory for sorting one run of a rebuild (about 100 bytes a player).
SORTED_RUN_WORK_MEM = "256MB"


def player_id_runs(*, board: BoardRef, day: date | None, runs: int) -> list[tuple[int, int]]:
    """At most ``runs`` half-open ranges ``[low, high)`` covering the board's player ids.

    The split points are quantiles of player_id from PostgreSQL's statistics on the results
    table (kept by ANALYZE), so clustered ids still give ranges of similar sizes; without
    statistics, or when they fall outside this board's ids, the ranges are of equal width.
    """
    with connection.cursor() as cursor:
        # Two lookups in match_result_board_player_idx. Filtering by day, void or ban here
        # would read every result; at worst a few ranges have nobody in them.
        cursor.execute(
            f"SELECT min(player_id), max(player_id) FROM {_RESULTS} WHERE board_id = %s",  # noqa: S608
            [board.id],
        )
        row = cursor.fetchone()
        if row is None or row[0] is None:
            return []
        cursor.execute(
            "SELECT histogram_bounds::text FROM pg_stats WHERE schemaname = current_schema() "
            "AND tablename = %s AND attname = 'player_id'",
            [_RESULTS],
        )
        stats = cursor.fetchone()
    bounds = sorted({int(v) for v in stats[0].strip("{}").split(",")}) if stats and stats[0] else []
    return player_id_split(low=int(row[0]), high=int(row[1]) + 1, runs=runs, bounds=bounds)


def player_id_split(*, low: int, high: int, runs: int, bounds: list[int]) -> list[tuple[int, int]]:
    """``[low, high)`` cut into at most ``runs`` ranges, at quantiles from ``bounds`` (sorted
    distinct ids) when enough of them fall inside, else at equal widths."""
    runs = max(1, runs)
    inside = [b for b in bounds if low < b < high]
    if len(inside) >= runs - 1 and runs > 1:
        step = len(inside) / runs
        points = sorted({inside[int(step * i)] for i in range(1, runs)})
    else:
        width = -(-(high - low) // runs)
        points = list(range(low + width, high, width)) if width > 0 else []
    edges = [low, *points, high]
    return [(a, b) for a, b in pairwise(edges) if a < b]


def _copy_chunks(
    sql: str,
    params: dict[str, Any],
    board: BoardRef,
    chunk_bytes: int,
    overflowed: list[int] | None,
) -> Iterator[list[bytes]]:
    raw = connection.cursor()
    try:
        pg_cursor = raw.cursor  # the psycopg cursor: Django's wrapper has no copy()
        # libpq hands COPY data over about a row at a time: gather blocks, join once per
        # chunk (appending to one bytes object would copy it again for every row).
        blocks: list[bytes] = []
        size = 0
        with pg_cursor.copy(sql, params) as copy:
            for block in copy:
                blocks.append(bytes(block))
                size += len(block)
                if size < chunk_bytes:
                    continue
                text = b"".join(blocks)
                cut = text.rfind(b"\n") + 1
                yield _flat_args(board, text[:cut], overflowed)
                blocks = [text[cut:]]
                size = len(blocks[0])
        text = b"".join(blocks)
        if text:
            yield _flat_args(board, text, overflowed)
    finally:
        raw.close()


def _flat_args(board: BoardRef, text: bytes, overflowed: list[int] | None) -> list[bytes]:
    args = text.split()
    if b"OVERFLOW" not in args:
        return args
    if overflowed is None:
        raise _overflow(board, args[args.index(b"OVERFLOW") + 1].decode())
    kept: list[bytes] = []
    for i in range(0, len(args), 2):
        if args[i] == b"OVERFLOW":
            overflowed.append(int(args[i + 1]))
        else:
            kept += args[i : i + 2]
    return kept


def board_scores_top(*, board: BoardRef, limit: int, day: date | None = None) -> list[BoardScore]:
    """The first ``limit`` players in rank order: score descending, then player id (stable)."""
    sql = f"""
        SELECT * FROM ({_scored_sql(board=board, day=day)}) s
        ORDER BY s.score DESC NULLS FIRST, s.player_id
        LIMIT %(limit)s
    """  # noqa: S608
    params = _params(board=board, day=day) | {"limit": int(limit)}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [_board_score(board, row) for row in cursor.fetchall()]


def board_scores_for_players(
    *,
    board: BoardRef,
    player_ids: Sequence[int],
    day: date | None = None,
    applied: Mapping[int, int] | None = None,
) -> dict[int, BoardScore]:
    """Board scores of the given players (those with no counted result are absent);
    ``applied``: as in ``board_scores_chunks``."""
    if not player_ids:
        return {}
    inner = _scored_sql(
        board=board,
        day=day,
        player_filter="AND r.player_id = ANY(%(players)s)",
        covered_only=applied is not None,
    )
    # Players whose cumulative points overflow the codec are left off the board by a rebuild.
    sql = f"SELECT * FROM ({inner}) s WHERE s.score IS NOT NULL"  # noqa: S608
    params = _params(board=board, day=day, applied=applied) | {
        "players": [int(p) for p in player_ids]
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {score.player_id: score for score in (_board_score(board, r) for r in cursor)}


def board_member_count(*, board: BoardRef, day: date | None = None) -> int:
    """How many players the board has: players with at least one counted result, less those
    whose cumulative points overflow the codec (a rebuild leaves them off)."""
    sql = f"SELECT COUNT(DISTINCT r.player_id) {_counted_results_sql(day=day)}"
    if board.rule == ScoringRule.CUMULATIVE:
        sql = f"""
            SELECT COUNT(*) FROM (
                SELECT r.player_id {_counted_results_sql(day=day)}
                GROUP BY r.player_id HAVING SUM(r.points) <= %(max_points)s
            ) p
        """  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(sql, _params(board=board, day=day))
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
    counted = _counted_results_sql(day=day)
    if board.rule == ScoringRule.CUMULATIVE:
        sql = f"""
            SELECT COUNT(*) FILTER (WHERE p.covered_points <= %(max_points)s),
                   COUNT(*) FILTER (WHERE p.points <= %(max_points)s)
            FROM (
                SELECT SUM(r.points) FILTER (WHERE {_COVERED}) AS covered_points,
                       SUM(r.points) AS points
                {counted}
                GROUP BY r.player_id
            ) p
        """  # noqa: S608
    else:
        sql = f"""
            SELECT COUNT(DISTINCT r.player_id) FILTER (WHERE {_COVERED}),
                   COUNT(DISTINCT r.player_id)
            {counted}
        """
    with connection.cursor() as cursor:
        cursor.execute(sql, _params(board=board, day=day, applied=applied))
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
        SELECT DISTINCT r.player_id {_counted_results_sql(day=day)}
          AND r.player_id = ANY(%(players)s)
          AND NOT {_COVERED}
    """
    params = _params(board=board, day=day, applied=applied) | {
        "players": [int(p) for p in player_ids]
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {int(row[0]) for row in cursor.fetchall()}


def board_days_with_results(*, board: BoardRef) -> list[date]:
    """The UTC days on which the board has counted results (the daily boards it has)."""
    sql = f"""
        SELECT DISTINCT (r.achieved_at AT TIME ZONE 'UTC')::date {_counted_results_sql(day=None)}
        ORDER BY 1
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, _params(board=board, day=None))
        return [row[0] for row in cursor.fetchall()]


def board_players_ingested_since(
    *, board: BoardRef, since: datetime, day: date | None = None, limit: int
) -> list[int]:
    """Up to ``limit`` players with a counted result ingested at or after ``since``: the players
    whose last writes a Redis restart may have taken with it. Reads the board's rows (no index
    carries ingested_at); run after a restart only, not every few seconds."""
    sql = f"""
        SELECT DISTINCT r.player_id {_counted_results_sql(day=day)}
          AND r.ingested_at >= %(since)s
        LIMIT %(limit)s
    """
    params = _params(board=board, day=day) | {"since": since, "limit": limit}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [int(row[0]) for row in cursor.fetchall()]


def board_days_last_ingested(*, board: BoardRef) -> dict[date, datetime]:
    """The UTC days on which the board has counted results -> when the last of them was
    ingested (a late result written to an old day's board extends that board's expiry)."""
    sql = f"""
        SELECT (r.achieved_at AT TIME ZONE 'UTC')::date, max(r.ingested_at)
        {_counted_results_sql(day=None)}
        GROUP BY 1
        ORDER BY 1
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, _params(board=board, day=None))
        return {row[0]: row[1] for row in cursor.fetchall()}


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
        SELECT r.player_id {_counted_results_sql(day=day)}
          AND r.player_id >= g.start
        ORDER BY r.player_id
        LIMIT 1
    """
    sql = f"""
        WITH bounds AS (
            SELECT MIN(player_id) AS lo, MAX(player_id) AS hi FROM {_RESULTS}
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
    params = _params(board=board, day=day) | {
        "size": int(size),
        "draws": int(size) * _SAMPLE_DRAWS_PER_PLAYER,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [int(row[0]) for row in cursor.fetchall()]


def match_results_of_player(
    *, player_id: int, queryset: QuerySet[MatchResult] | None = None
) -> QuerySet[MatchResult]:
    """A player's results on every board, found through the player index.

    ``player_id`` has no index of its own (each index is one more write per ingested result);
    match_result_board_player_idx leads with board_id. Naming every board lets PostgreSQL
    descend that index once per board instead of reading the whole table.
    """
    results = MatchResult.objects.all() if queryset is None else queryset
    if not 1 <= player_id <= BIGINT_MAX:
        return results.none()
    board_ids = list(Board.objects.order_by("id").values_list("id", flat=True))
    return results.filter(board_id__in=board_ids, player_id=player_id)


@dataclass(frozen=True, slots=True)
class LatestResults:
    """The match id of each player's latest counted result on latest-rule boards."""

    season_long: dict[tuple[int, int], uuid.UUID]  # (board, player) -> match id
    daily: dict[tuple[int, int, date], uuid.UUID]  # (board, player, UTC day) -> match id


def latest_results_get(*, candidates: Iterable[tuple[int, int, datetime]]) -> LatestResults:
    """Which stored result is each player's latest, season-long and of its UTC day, on the
    boards named by ``candidates`` (board id, player id, a result's achieved_at).

    The latest by achieved_at; an exact tie goes to the greater match id (the order the rebuild
    uses), so the answer never depends on the order results were delivered in. Only counted
    results compete: voided ones and banned players' are left out.
    """
    pairs = sorted({(board, player) for board, player, _ in candidates})
    days = sorted(
        {(board, player, moment.astimezone(UTC).date()) for board, player, moment in candidates}
    )
    counted = f"""
        r.voided_at IS NULL AND NOT EXISTS (
            SELECT 1 FROM {_BANS} b WHERE b.season_id = r.season_id AND b.player_id = r.player_id
        )
    """  # noqa: S608
    season_long_sql = f"""
        SELECT DISTINCT ON (r.board_id, r.player_id) r.board_id, r.player_id, r.match_id
        FROM {_RESULTS} r
        JOIN unnest(%s::bigint[], %s::bigint[]) AS t(board_id, player_id)
          ON r.board_id = t.board_id AND r.player_id = t.player_id
        WHERE {counted}
        ORDER BY r.board_id, r.player_id, r.achieved_at DESC, r.match_id DESC
    """  # noqa: S608
    daily_sql = f"""
        SELECT DISTINCT ON (r.board_id, r.player_id, t.day) r.board_id, r.player_id, t.day,
               r.match_id
        FROM {_RESULTS} r
        JOIN unnest(%s::bigint[], %s::bigint[], %s::date[]) AS t(board_id, player_id, day)
          ON r.board_id = t.board_id AND r.player_id = t.player_id
         AND r.achieved_at >= (t.day::timestamp AT TIME ZONE 'UTC')
         AND r.achieved_at < ((t.day + 1)::timestamp AT TIME ZONE 'UTC')
        WHERE {counted}
        ORDER BY r.board_id, r.player_id, t.day, r.achieved_at DESC, r.match_id DESC
    """  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(season_long_sql, [[b for b, _ in pairs], [p for _, p in pairs]])
        season_long = {(int(row[0]), int(row[1])): row[2] for row in cursor.fetchall()}
        cursor.execute(
            daily_sql, [[b for b, _, _ in days], [p for _, p, _ in days], [d for _, _, d in days]]
        )
        daily = {(int(row[0]), int(row[1]), row[2]): row[3] for row in cursor.fetchall()}
    return LatestResults(season_long=season_long, daily=daily)


def board_stored_offsets(*, board: BoardRef) -> dict[int, int]:
    """Kafka partition -> the highest offset of the board's stored results (voided, banned and
    all): what a board rebuilt from PostgreSQL read after this moment already counts, so its
    applied-offset watermark may cover it (docs/ingestion.md, "Redis losing data").

    A scan of the board's rows (no index carries the Kafka columns: every stored result would
    pay for one); it runs only when a board is recovered or repaired, next to a rebuild that
    reads all of them anyway.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT kafka_partition, MAX(kafka_offset) FROM {_RESULTS}"  # noqa: S608
            " WHERE board_id = %s AND kafka_partition IS NOT NULL GROUP BY kafka_partition",
            [board.id],
        )
        return {int(partition): int(offset) for partition, offset in cursor.fetchall()}


@dataclass(frozen=True, slots=True)
class OffsetGap:
    """Offsets of one Kafka partition a board should hold but may not: (low, high), exclusive."""

    board_id: int
    partition: int
    low: int  # the board's watermark for the partition (-1: none)
    high: int  # the consumer group's committed offset (the next one it will read)


def boards_days_with_results_in_gaps(*, gaps: Sequence[OffsetGap]) -> dict[int, set[date]]:
    """board -> the UTC days of its counted results stored from an offset inside one of its
    gaps: the board (season-long and those days) misses them if Redis lost them.

    Reads each board's results through the board's index (no index on the offsets: this runs
    only after a Redis failover, and one index less is one write less per result).
    """
    if not gaps:
        return {}
    sql = """
        SELECT DISTINCT m.board_id, (m.achieved_at AT TIME ZONE 'UTC')::date
        FROM ingestion_matchresult m
        JOIN unnest(%s::bigint[], %s::int[], %s::bigint[], %s::bigint[])
             AS g(board_id, part, low, high)
          ON m.board_id = g.board_id AND m.kafka_partition = g.part
         AND m.kafka_offset > g.low AND m.kafka_offset < g.high
        WHERE m.voided_at IS NULL
    """
    params = [
        [gap.board_id for gap in gaps],
        [gap.partition for gap in gaps],
        [gap.low for gap in gaps],
        [gap.high for gap in gaps],
    ]
    found: dict[int, set[date]] = {}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for board_id, day in cursor.fetchall():
            found.setdefault(int(board_id), set()).add(day)
    return found
