"""Each player's score on a board, computed from PostgreSQL: the stream a rebuild loads and a
reconcile compares, and the top a close-out freezes (the aggregation: ``_sql``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from itertools import pairwise
from typing import Any

from django.db import connection

from ..codec import CodecError
from ..models import Cohort, CohortMember
from ._sql import RESULTS, board_params, scored_sql
from .boards import BoardRef

# Server-side cursor batch: large enough to amortise round trips, small enough to stream.
DEFAULT_CHUNK_ROWS = 20_000


@dataclass(frozen=True, slots=True)
class BoardScore:
    player_id: int
    points: int
    # The time that places the player among equal points: the earliest time the best value was
    # reached (best), the latest result's (latest, cumulative).
    achieved_at: datetime
    # The encoded score; on a board with tie-break columns, the wide key (WideKeyCodec).
    score: int | str
    # On a board with tie-break columns, the value of each column in the board's order.
    tiebreakers: tuple[int, ...] | None = None


def _overflow(board: BoardRef, player_id: object) -> CodecError:
    return CodecError(
        f"board {board.id} ({board.slug} of season {board.season_id}): cumulative points of "
        f"player {player_id!s} exceed the codec maximum {board.max_points}"
    )


def _board_score(board: BoardRef, row: tuple[Any, ...]) -> BoardScore:
    player_id, points, achieved_at, score, *wide = row
    if score is None:
        raise _overflow(board, player_id)
    if wide:
        return BoardScore(
            int(player_id), int(points), achieved_at, str(score), tuple(map(int, wide[0]))
        )
    return BoardScore(int(player_id), int(points), achieved_at, int(score))


def best_first(board: BoardRef) -> str:
    """SQL ordering the scored rows ``s`` best first (an overflow, NULL, first of all): the
    encoded score descending, or a wide key's bytes ascending (collation "C": byte order)."""
    if board.tiebreaks:
        return 's.score COLLATE "C" ASC NULLS FIRST'
    return "s.score DESC NULLS FIRST"


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
    sql = scored_sql(board=board, day=day, covered_only=applied is not None)
    params = board_params(board=board, day=day, applied=applied)
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
    params = board_params(board=board, day=day)
    if sorted_runs is None:
        inner = scored_sql(board=board, day=day)
        sql = (
            f"COPY (SELECT COALESCE(score::text, 'OVERFLOW'), player_id FROM ({inner}) s) TO STDOUT"  # noqa: S608
        )
        yield from _copy_chunks(sql, params, board, chunk_bytes, overflowed)
        return
    inner = scored_sql(
        board=board,
        day=day,
        player_filter="AND r.player_id >= %(run_low)s AND r.player_id < %(run_high)s",
    )
    sql = f"""
        COPY (SELECT COALESCE(score::text, 'OVERFLOW'), player_id FROM ({inner}) s
              ORDER BY {best_first(board)}) TO STDOUT
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
            f"SELECT min(player_id), max(player_id) FROM {RESULTS} WHERE board_id = %s",  # noqa: S608
            [board.id],
        )
        row = cursor.fetchone()
        if row is None or row[0] is None:
            return []
        cursor.execute(
            "SELECT histogram_bounds::text FROM pg_stats WHERE schemaname = current_schema() "
            "AND tablename = %s AND attname = 'player_id'",
            [RESULTS],
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
    """The first ``limit`` players in rank order: score descending, then player id (stable). A
    player whose cumulative sum overflows the codec is off the board, as in Redis and in the
    history (``board_ranks_sql``), so it is off the final standings too."""
    sql = f"""
        SELECT * FROM ({scored_sql(board=board, day=day)}) s
        WHERE s.score IS NOT NULL
        ORDER BY {best_first(board)}, s.player_id
        LIMIT %(limit)s
    """  # noqa: S608
    params = board_params(board=board, day=day) | {"limit": int(limit)}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [_board_score(board, row) for row in cursor.fetchall()]


def board_ranks_sql(*, board: BoardRef) -> tuple[str, dict[str, Any]]:
    """The SQL, and its parameters, of every player's rank on the board, for a set-based write
    (the close-out's history archive): rows (player_id, points, rank, total). Ranks as the
    final standings rank (``board_scores_top``: the board's order, then the lower player id on
    an exact tie); a player whose cumulative sum overflows is off the board, as in Redis."""
    sql = f"""
        SELECT s.player_id, s.points,
               ROW_NUMBER() OVER (ORDER BY {best_first(board)}, s.player_id) AS rank,
               COUNT(*) OVER () AS total
        FROM ({scored_sql(board=board, day=None)}) s
        WHERE s.score IS NOT NULL
    """  # noqa: S608
    return sql, board_params(board=board, day=None)


def board_cohort_ranks_sql(*, board: BoardRef) -> tuple[str, dict[str, Any]]:
    """The SQL, and its parameters, of every cohort member's place in their cohort (a board
    with cohorts), for the close-out's league movements: rows (player_id, tier, cohort_rank,
    shared_rank, players). ``cohort_rank`` is the final standings' rank within the cohort (the
    board's order, then the lower player id on an exact tie); ``shared_rank`` gives an exact
    tie one rank (1 + the members strictly better); ``players``: the cohort's members with a
    score now (a member whose results were all voided, or who was banned, has none)."""
    order = best_first(board)
    sql = f"""
        SELECT m.player_id, c.tier,
               ROW_NUMBER() OVER (PARTITION BY c.id ORDER BY {order}, s.player_id) AS cohort_rank,
               RANK() OVER (PARTITION BY c.id ORDER BY {order}) AS shared_rank,
               COUNT(*) OVER (PARTITION BY c.id) AS players
        FROM {CohortMember._meta.db_table} m
        JOIN {Cohort._meta.db_table} c ON c.id = m.cohort_id
        JOIN ({scored_sql(board=board, day=None)}) s ON s.player_id = m.player_id
        WHERE m.board_id = %(board_id)s AND s.score IS NOT NULL
    """  # noqa: S608
    return sql, board_params(board=board, day=None)


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
    inner = scored_sql(
        board=board,
        day=day,
        player_filter="AND r.player_id = ANY(%(players)s)",
        covered_only=applied is not None,
    )
    # Players whose cumulative points overflow the codec are left off the board by a rebuild.
    sql = f"SELECT * FROM ({inner}) s WHERE s.score IS NOT NULL"  # noqa: S608
    params = board_params(board=board, day=day, applied=applied) | {
        "players": [int(p) for p in player_ids]
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {score.player_id: score for score in (_board_score(board, r) for r in cursor)}
