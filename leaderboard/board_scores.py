"""Reads over match results: each player's board score, computed from PostgreSQL.

The aggregation here is the definition a rebuild and a reconcile hold Redis to, so it follows
the score semantics of the live apply exactly:

- ``best``: the highest points, at the EARLIEST time they were reached;
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

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from itertools import pairwise
from typing import Any

from django.db import connection
from django.db.models import QuerySet

from seasons.models import ScoringRule, Season

from .codec import BIGINT_MAX, CodecError
from .models import MatchResult

# Server-side cursor batch: large enough to amortise round trips, small enough to stream.
DEFAULT_CHUNK_ROWS = 20_000


@dataclass(frozen=True, slots=True)
class BoardScore:
    player_id: int
    points: int
    # The time that places the player among equal points: earliest best (best), latest (cumulative).
    achieved_at: datetime
    score: int


def _counted_results_sql(*, day: date | None) -> str:
    day_filter = "AND r.achieved_at >= %(day_start)s AND r.achieved_at < %(day_end)s" if day else ""
    return f"""
        FROM ingestion_matchresult r
        WHERE r.season_id = %(season_id)s
          AND r.voided_at IS NULL
          {day_filter}
          AND NOT EXISTS (
              SELECT 1 FROM leaderboard_playerban b
              WHERE b.season_id = r.season_id AND b.player_id = r.player_id
          )
    """  # noqa: S608


def _per_player_sql(*, season: Season, day: date | None, player_filter: str = "") -> str:
    """One row per player: player_id, points, achieved_at (the time that counts)."""
    counted = _counted_results_sql(day=day) + player_filter
    if season.rule == ScoringRule.BEST:
        # Reads match_result_player_idx (season, player_id, -points, achieved_at) in order,
        # index only.
        return f"""
            SELECT DISTINCT ON (r.player_id) r.player_id, r.points, r.achieved_at
            {counted}
            ORDER BY r.player_id, r.points DESC, r.achieved_at
        """
    return f"""
        SELECT r.player_id, SUM(r.points) AS points, MAX(r.achieved_at) AS achieved_at
        {counted}
        GROUP BY r.player_id
    """


def _scored_sql(*, season: Season, day: date | None, player_filter: str = "") -> str:
    """player_id, points, achieved_at, score (NULL when cumulative points overflow the codec)."""
    inner = _per_player_sql(season=season, day=day, player_filter=player_filter)
    # Same as ScoreCodec.ticks: whole ticks of exact (numeric) elapsed seconds, floored.
    ticks = (
        "FLOOR((EXTRACT(EPOCH FROM p.achieved_at) - EXTRACT(EPOCH FROM %(starts_at)s::timestamptz))"
        " / %(resolution)s)::bigint"
    )
    return f"""
        SELECT p.player_id, p.points, p.achieved_at,
               CASE WHEN p.points > %(max_points)s THEN NULL
                    ELSE p.points::bigint * %(scale)s + (%(max_ticks)s - {ticks})
               END AS score
        FROM ({inner}) p
    """  # noqa: S608


def _params(*, season: Season, day: date | None) -> dict[str, Any]:
    codec = season.codec
    params: dict[str, Any] = {
        "season_id": season.id,
        "starts_at": season.starts_at,
        "resolution": codec.resolution_seconds,
        "max_points": codec.max_points,
        "max_ticks": codec.max_ticks,
        "scale": 1 << codec.time_bits,
    }
    if day is not None:
        start = datetime.combine(day, time(0), tzinfo=UTC)
        params["day_start"] = start
        params["day_end"] = start + timedelta(days=1)
    return params


def _overflow(season: Season, player_id: object) -> CodecError:
    return CodecError(
        f"season {season.id}: cumulative points of player {player_id!s} exceed the codec "
        f"maximum {season.codec.max_points}"
    )


def _board_score(season: Season, row: tuple[Any, ...]) -> BoardScore:
    player_id, points, achieved_at, score = row
    if score is None:
        raise _overflow(season, player_id)
    return BoardScore(int(player_id), int(points), achieved_at, int(score))


def board_scores_chunks(
    *, season: Season, day: date | None = None, chunk_rows: int = DEFAULT_CHUNK_ROWS
) -> Iterator[list[BoardScore]]:
    """Every counted player's board score, in chunks, through a server-side cursor.

    Runs in the caller's transaction when there is one (a rebuild reads in its snapshot).
    """
    sql = _scored_sql(season=season, day=day)
    params = _params(season=season, day=day)
    with connection.chunked_cursor() as cursor:
        cursor.execute(sql, params)
        while rows := cursor.fetchmany(chunk_rows):
            yield [_board_score(season, row) for row in rows]


def board_scores_zadd_chunks(
    *,
    season: Season,
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
    params = _params(season=season, day=day)
    if sorted_runs is None:
        inner = _scored_sql(season=season, day=day)
        sql = (
            f"COPY (SELECT COALESCE(score::text, 'OVERFLOW'), player_id FROM ({inner}) s) TO STDOUT"  # noqa: S608
        )
        yield from _copy_chunks(sql, params, season, chunk_bytes, overflowed)
        return
    inner = _scored_sql(
        season=season,
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
    for low, high in player_id_runs(season=season, day=day, runs=sorted_runs):
        run_params = params | {"run_low": low, "run_high": high}
        yield from _copy_chunks(sql, run_params, season, chunk_bytes, overflowed)


# Memory for sorting one run of a rebuild (about 100 bytes a player).
SORTED_RUN_WORK_MEM = "256MB"


def player_id_runs(*, season: Season, day: date | None, runs: int) -> list[tuple[int, int]]:
    """At most ``runs`` half-open ranges ``[low, high)`` covering the season's player ids.

    The split points are quantiles of player_id from PostgreSQL's statistics on the results
    table (kept by ANALYZE), so clustered ids still give ranges of similar sizes; without
    statistics, or when they fall outside this board's ids, the ranges are of equal width.
    """
    with connection.cursor() as cursor:
        # Two lookups in match_result_player_idx. Filtering by day, void or ban here would read
        # every result; at worst a few ranges have nobody in them.
        cursor.execute(
            "SELECT min(player_id), max(player_id) FROM ingestion_matchresult WHERE season_id = %s",
            [season.id],
        )
        row = cursor.fetchone()
        if row is None or row[0] is None:
            return []
        cursor.execute(
            "SELECT histogram_bounds::text FROM pg_stats WHERE schemaname = current_schema() "
            "AND tablename = 'ingestion_matchresult' AND attname = 'player_id'"
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
    season: Season,
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
                yield _flat_args(season, text[:cut], overflowed)
                blocks = [text[cut:]]
                size = len(blocks[0])
        text = b"".join(blocks)
        if text:
            yield _flat_args(season, text, overflowed)
    finally:
        raw.close()


def _flat_args(season: Season, text: bytes, overflowed: list[int] | None) -> list[bytes]:
    args = text.split()
    if b"OVERFLOW" not in args:
        return args
    if overflowed is None:
        raise _overflow(season, args[args.index(b"OVERFLOW") + 1].decode())
    kept: list[bytes] = []
    for i in range(0, len(args), 2):
        if args[i] == b"OVERFLOW":
            overflowed.append(int(args[i + 1]))
        else:
            kept += args[i : i + 2]
    return kept


def board_scores_top(*, season: Season, limit: int, day: date | None = None) -> list[BoardScore]:
    """The first ``limit`` players in rank order: score descending, then player id (stable)."""
    sql = f"""
        SELECT * FROM ({_scored_sql(season=season, day=day)}) s
        ORDER BY s.score DESC NULLS FIRST, s.player_id
        LIMIT %(limit)s
    """  # noqa: S608
    params = _params(season=season, day=day) | {"limit": int(limit)}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [_board_score(season, row) for row in cursor.fetchall()]


def board_scores_for_players(
    *, season: Season, player_ids: Sequence[int], day: date | None = None
) -> dict[int, BoardScore]:
    """Board scores of the given players (those with no counted result are absent)."""
    if not player_ids:
        return {}
    inner = _scored_sql(season=season, day=day, player_filter="AND r.player_id = ANY(%(players)s)")
    # Players whose cumulative points overflow the codec are left off the board by a rebuild.
    sql = f"SELECT * FROM ({inner}) s WHERE s.score IS NOT NULL"  # noqa: S608
    params = _params(season=season, day=day) | {"players": [int(p) for p in player_ids]}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {score.player_id: score for score in (_board_score(season, r) for r in cursor)}


def board_member_count(*, season: Season, day: date | None = None) -> int:
    """How many players the board has: players with at least one counted result, less those
    whose cumulative points overflow the codec (a rebuild leaves them off)."""
    sql = f"SELECT COUNT(DISTINCT r.player_id) {_counted_results_sql(day=day)}"
    if season.rule == ScoringRule.CUMULATIVE:
        sql = f"""
            SELECT COUNT(*) FROM (
                SELECT r.player_id {_counted_results_sql(day=day)}
                GROUP BY r.player_id HAVING SUM(r.points) <= %(max_points)s
            ) p
        """  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(sql, _params(season=season, day=day))
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def board_days_with_results(*, season: Season) -> list[date]:
    """The UTC days on which the season has counted results (the daily boards it has)."""
    sql = f"""
        SELECT DISTINCT (r.achieved_at AT TIME ZONE 'UTC')::date {_counted_results_sql(day=None)}
        ORDER BY 1
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, _params(season=season, day=None))
        return [row[0] for row in cursor.fetchall()]


# Random starting points drawn per sampled player: duplicates (two starts landing before the
# same player) collapse, so draw more than needed and keep the first ``size`` distinct ones.
_SAMPLE_DRAWS_PER_PLAYER = 4


def board_players_sample(*, season: Season, size: int, day: date | None = None) -> list[int]:
    """Up to ``size`` random players that have a counted result (reconcile's sample).

    Scales with the sample, not the season: random player ids are drawn between the season's
    lowest and highest player id (two index lookups), and each draw takes the first counted
    player at or above it through match_result_player_idx (season, player_id, ...), so no
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
            SELECT MIN(player_id) AS lo, MAX(player_id) AS hi FROM ingestion_matchresult
            WHERE season_id = %(season_id)s
        ), starts AS (
            SELECT b.lo + FLOOR(random() * (b.hi - b.lo + 1))::bigint AS start
            FROM bounds b, generate_series(1, %(draws)s)
            WHERE b.lo IS NOT NULL
        )
        SELECT DISTINCT picked.player_id
        FROM starts g CROSS JOIN LATERAL ({draw}) picked
        LIMIT %(size)s
    """  # noqa: S608
    params = _params(season=season, day=day) | {
        "size": int(size),
        "draws": int(size) * _SAMPLE_DRAWS_PER_PLAYER,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [int(row[0]) for row in cursor.fetchall()]


def match_results_of_player(
    *, player_id: int, queryset: QuerySet[MatchResult] | None = None
) -> QuerySet[MatchResult]:
    """A player's results in every season, found through the player index.

    ``player_id`` has no index of its own (each index is one more write per ingested result);
    match_result_player_idx leads with season_id. Naming every season lets PostgreSQL descend
    that index once per season instead of reading the whole table.
    """
    results = MatchResult.objects.all() if queryset is None else queryset
    if not 1 <= player_id <= BIGINT_MAX:
        return results.none()
    season_ids = list(Season.objects.order_by("id").values_list("id", flat=True))
    return results.filter(season_id__in=season_ids, player_id=player_id)
