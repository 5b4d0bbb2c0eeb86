"""Rebuild a board from PostgreSQL while ingestion keeps writing to it.

Rebuild protocol (see leaderboard/lua/rebuild_*.lua and the ingestion apply script): the live
board stays in place while a temp board is filled from a PostgreSQL snapshot; results applied
meanwhile are kept aside (pending list, then delta board) and merged into the temp board
before it is RENAMEd over the live one, so nothing ingested during a rebuild is lost or
counted twice, and readers never see an empty or partial board.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date
from itertools import chain

from django.db import connection, transaction
from django.utils import timezone

from leaderboard import keys
from leaderboard.models import RebuildRun, RunStatus
from leaderboard.redis import BoardRedis, get_board_redis
from leaderboard.scripts import get_script
from leaderboard.selectors.boards import BoardRef, board_get
from leaderboard.selectors.scores import board_scores_zadd_chunks
from seasons.models import Season, SeasonStatus

from .apply import daily_board_expire_at, wide_spec_args

logger = logging.getLogger(__name__)

# The marker outlives a crashed rebuild by at most this long; a running rebuild refreshes it.
MARKER_TTL_SECONDS = 600
# How long a finished rebuild's snapshot keeps late applies of results it counted off the
# board (keys.rebuild_done). A consumer applies what it stored within seconds, or once Redis is
# back after an outage it retried through; a day outlasts any outage it would wait for.
REBUILD_DONE_TTL_SECONDS = 86_400
# Members per ZADD, and per delta-merge script call (short calls keep Redis responsive).
DEFAULT_ZADD_BATCH = 1000
DELTA_MERGE_BATCH = 1000
# Chunks (about 1 MB of text, 40,000 players each) the PostgreSQL reader may run ahead of the
# Redis loader: a whole sorted run, so PostgreSQL aggregates and sorts the next run while Redis
# loads this one (at most ~130 MB of a rebuild's memory).
PREFETCH_CHUNKS = 32
# A rebuild reads the board in this many player-id ranges, each sorted by score: Redis loads
# such runs several times faster than members in player order (docs/benchmarks.md, "Rebuild").
REBUILD_SORTED_RUNS = 10
# Players left off for overflowing kept on the RebuildRun (the count is always exact).
MAX_OVERFLOWED_RECORDED = 1000


# Phases reported to ``on_phase`` (tests drive ingestion through each of them).
PHASE_PENDING = "pending"  # marker set, no snapshot yet
PHASE_ACTIVATED = "activated"  # snapshot taken and in the marker, loading not started
PHASE_LOADED = "loaded"  # temp board loaded, delta not merged
PHASE_MERGED = "merged"  # delta merged in chunks, the atomic finish comes next


class RebuildInProgressError(RuntimeError):
    """Another rebuild of the same board holds its marker."""


class SeasonClosedError(RuntimeError):
    """The board's season is closed: the close-out dropped its keys from Redis, and its final
    standings are the truth. A rebuild would bring the board back with no expiry and nothing
    left to drop it again."""

    def __init__(self, *, board_id: int, season_id: int) -> None:
        super().__init__(
            f"board {board_id} of season {season_id}: the season is closed; its boards are no "
            "longer served from Redis (its final standings are), so none is rebuilt"
        )
        self.board_id = board_id
        self.season_id = season_id


def board_season_open_check(*, board: BoardRef) -> None:
    """Raise SeasonClosedError when the board's season is closed."""
    if Season.objects.filter(pk=board.season_id, status=SeasonStatus.CLOSED).exists():
        raise SeasonClosedError(board_id=board.id, season_id=board.season_id)


@dataclass(frozen=True, slots=True)
class RebuildResult:
    board_id: int
    day: date | None
    board_key: str
    members: int
    loaded: int
    delta_members: int
    seconds: float
    # Players left off because their cumulative points overflow the codec (docs/operations.md).
    overflowed: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class _BoardKeys:
    live: str
    temp: str
    marker: str
    pending: str
    delta: str
    done: str

    @property
    def live_index(self) -> str:
        return keys.board_index(board_key=self.live)

    @property
    def temp_index(self) -> str:
        return keys.board_index(board_key=self.temp)


def _board_keys(*, board_id: int, day: date | None) -> _BoardKeys:
    live = (
        keys.board(board_id=board_id)
        if day is None
        else keys.daily_board(board_id=board_id, day=day)
    )
    return _BoardKeys(
        live=live,
        temp=keys.rebuild_temp(board_key=live),
        marker=keys.rebuild_marker(board_key=live),
        pending=keys.rebuild_pending(board_key=live),
        delta=keys.rebuild_delta(board_key=live),
        done=keys.rebuild_done(board_key=live),
    )


_DONE = object()


def _read_snapshot_and_stream(
    *,
    board: BoardRef,
    day: date | None,
    on_snapshot: Callable[[str], None],
    on_phase: Callable[[str], None] | None,
    out: queue.Queue[object],
    stop: threading.Event,
    overflowed: list[int],
) -> None:
    """Producer thread: one REPEATABLE READ transaction, its snapshot, then the aggregation."""
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                # The first query fixes the transaction's snapshot; this reads that very one.
                cursor.execute("SELECT pg_current_snapshot()::text")
                row = cursor.fetchone()
                assert row is not None
            on_snapshot(str(row[0]))
            if on_phase is not None:
                on_phase(PHASE_ACTIVATED)
            for chunk in board_scores_zadd_chunks(
                board=board, day=day, overflowed=overflowed, sorted_runs=REBUILD_SORTED_RUNS
            ):
                while not stop.is_set():
                    try:
                        out.put(chunk, timeout=0.5)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
        out.put(_DONE)
    except BaseException as exc:
        out.put(exc)
    finally:
        connection.close()


def _chunks_from(out: queue.Queue[object], producer: threading.Thread) -> Iterator[list[bytes]]:
    while True:
        try:
            item = out.get(timeout=1.0)
        except queue.Empty:
            if not producer.is_alive():
                raise RuntimeError("the PostgreSQL reader stopped without a result") from None
            continue
        if item is _DONE:
            return
        if isinstance(item, BaseException):
            raise item
        yield item  # type: ignore[misc]


def spec_args(board: BoardRef) -> list[str | int]:
    """The board's spec as every merging script takes it: rule, order, time_bits, max_points
    (a board with tie-break columns: its wide spec, as the ``wide_`` scripts take it)."""
    if board.tiebreaks:
        return wide_spec_args(board)
    return [board.rule, board.order, board.codec.time_bits, board.codec.max_points]


def board_rebuild(
    *,
    board_id: int,
    day: date | None = None,
    progress: Callable[[int], None] | None = None,
    reason: str = "",
    zadd_batch: int = DEFAULT_ZADD_BATCH,
    on_phase: Callable[[str], None] | None = None,
) -> RebuildResult:
    """Rebuild the board's season-long sorted set (or that of UTC ``day``) from PostgreSQL.

    ``progress`` is called with the number of members each loaded chunk added; ``on_phase``
    with each PHASE_* as the protocol reaches it (PHASE_ACTIVATED from the reader thread).
    Raises RebuildInProgressError when the board is already being rebuilt, SeasonClosedError
    when its season is closed (at the start, or by the finish: the board then leaves Redis).

    A player whose cumulative points overflow the codec is left off the board, never clamped,
    and listed in the result and on the RebuildRun (live ingestion leaves off the result that
    would overflow; see docs/operations.md).
    """
    started = time.monotonic()
    board = board_get(board_id=board_id)
    board_season_open_check(board=board)
    k = _board_keys(board_id=board_id, day=day)
    client = get_board_redis()
    rule_args = spec_args(board)
    wide = bool(board.tiebreaks)
    # Scripts of a board with tie-break columns are the wide_ twins.
    prefix = "wide_" if wide else ""
    scratch = [k.marker, k.pending, k.delta, k.temp, *([k.temp_index] if wide else [])]

    if not get_script(client, "rebuild_begin")(keys=scratch, args=[MARKER_TTL_SECONDS]):
        raise RebuildInProgressError(f"board {k.live} is already being rebuilt")
    run = RebuildRun.objects.create(
        season_id=board.season_id, board_id=board_id, day=day, reason=reason[:200]
    )
    snapshot: list[str] = []
    overflowed: list[int] = []

    def activate(snap: str) -> None:
        get_script(client, f"{prefix}rebuild_activate")(
            keys=[k.marker, k.pending, k.delta], args=[snap, *rule_args, MARKER_TTL_SECONDS]
        )
        snapshot.append(snap)

    out: queue.Queue[object] = queue.Queue(maxsize=PREFETCH_CHUNKS)
    stop = threading.Event()
    producer = threading.Thread(
        target=_read_snapshot_and_stream,
        kwargs={
            "board": board,
            "day": day,
            "on_snapshot": activate,
            "on_phase": on_phase,
            "out": out,
            "stop": stop,
            "overflowed": overflowed,
        },
        name=f"rebuild-reader-{board_id}",
        daemon=True,
    )
    try:
        if on_phase is not None:
            on_phase(PHASE_PENDING)
        producer.start()
        loaded = _load_temp(
            client,
            k,
            _chunks_from(out, producer),
            zadd_batch=zadd_batch,
            progress=progress,
            wide=wide,
        )
        if on_phase is not None:
            on_phase(PHASE_LOADED)
        delta_seen, merged_off = _merge_delta(client, k, rule_args, wide=wide)
        overflowed += merged_off
        if on_phase is not None:
            on_phase(PHASE_MERGED)
        ttl_ms = 0
        if day is not None:
            now = timezone.now()
            ttl_ms = max(1, daily_board_expire_at(day=day, now=now) - int(now.timestamp())) * 1000
        finish_keys = (
            [k.temp, k.temp_index, k.live, k.live_index, k.marker, k.pending, k.delta, k.done]
            if wide
            else [k.temp, k.live, k.marker, k.pending, k.delta, k.done]
        )
        finished = get_script(client, f"{prefix}rebuild_finish")(
            keys=finish_keys, args=[snapshot[0], *rule_args, ttl_ms, REBUILD_DONE_TTL_SECONDS]
        )
        size = int(finished[0])
        overflowed += [int(member) for member in finished[1:]]
        try:
            board_season_open_check(board=board)
        except SeasonClosedError:
            # The close-out committed and unlinked the board's keys after the check at the
            # start: the finish's rename just put the board back, with no expiry and nothing
            # left to drop it. Dropped again (before the close-out's unlink this is a no-op).
            client.unlink(*([k.live, k.live_index] if wide else [k.live]))
            raise
    except BaseException as exc:
        stop.set()
        if producer.is_alive():
            producer.join(timeout=30)
        get_script(client, "rebuild_abort")(keys=scratch)
        RebuildRun.objects.filter(pk=run.pk).update(
            status=RunStatus.FAILED, finished_at=timezone.now(), error=repr(exc)[:5000]
        )
        raise
    producer.join(timeout=30)
    left_off = tuple(sorted(set(overflowed)))
    if left_off:
        logger.error(
            "rebuild of %s: cumulative points of %d player(s) overflow the codec; left off the "
            "board: %s",
            k.live,
            len(left_off),
            list(left_off[:MAX_OVERFLOWED_RECORDED]),
        )
    RebuildRun.objects.filter(pk=run.pk).update(
        status=RunStatus.SUCCEEDED,
        finished_at=timezone.now(),
        members=size,
        delta_members=delta_seen,
        overflowed_count=len(left_off),
        overflowed_players=list(left_off[:MAX_OVERFLOWED_RECORDED]),
    )
    return RebuildResult(
        board_id=board_id,
        day=day,
        board_key=k.live,
        members=size,
        loaded=loaded,
        delta_members=delta_seen,
        seconds=time.monotonic() - started,
        overflowed=left_off,
    )


def _load_temp(
    client: BoardRedis,
    k: _BoardKeys,
    chunks: Iterator[list[bytes]],
    *,
    zadd_batch: int,
    progress: Callable[[int], None] | None,
    wide: bool = False,
) -> int:
    """Plain ZADDs of the snapshot's scores into the temp board, one pipeline per chunk (on a
    board with tie-break columns, ``key, player`` pairs: each member at score 0 as key +
    player, and the player's key in the temp board's index)."""
    step = 2 * zadd_batch
    loaded = 0
    for flat in chunks:
        pipe = client.pipeline(transaction=False)
        for start in range(0, len(flat), step):
            pairs = flat[start : start + step]
            if wide:
                wide_keys, players = pairs[0::2], pairs[1::2]
                members = chain.from_iterable(
                    (b"0", key + player) for key, player in zip(wide_keys, players, strict=True)
                )
                pipe.execute_command("ZADD", k.temp, *members)
                index = chain.from_iterable(zip(players, wide_keys, strict=True))
                pipe.execute_command("HSET", k.temp_index, *index)
            else:
                pipe.execute_command("ZADD", k.temp, *pairs)
        # Keep the marker alive (and a crashed rebuild's temp board from lingering forever).
        if wide:
            pipe.expire(k.temp_index, MARKER_TTL_SECONDS)
        pipe.expire(k.marker, MARKER_TTL_SECONDS)
        pipe.expire(k.temp, MARKER_TTL_SECONDS)
        replies = pipe.execute()
        if not replies[-2]:
            raise RuntimeError(f"rebuild marker of {k.live} vanished during loading")
        added = len(flat) // 2
        loaded += added
        if progress is not None:
            progress(added)
    return loaded


def _merge_delta(
    client: BoardRedis, k: _BoardKeys, rule_args: list[str | int], *, wide: bool = False
) -> tuple[int, list[int]]:
    """Merge the delta into the temp board in short script calls; the finish takes the rest.

    Returns how many delta members were merged here (ingestion may add more meanwhile, so
    this stops once the remainder is small enough for one atomic finishing call), and the
    players left off because their cumulative points overflow.
    """
    merge = get_script(client, "wide_rebuild_merge_delta" if wide else "rebuild_merge_delta")
    merge_keys = [k.delta, k.temp, k.temp_index] if wide else [k.delta, k.temp]
    seen = 0
    left_off: list[int] = []
    # A wide board's delta is a hash (player -> key), a plain one's a sorted set.
    remaining = int(client.hlen(k.delta) if wide else client.zcard(k.delta))
    rounds = 0
    cursor = b"0"  # a wide board's HSCAN cursor, carried from call to call
    while remaining > DELTA_MERGE_BATCH and rounds < 1000:
        seen += min(remaining, DELTA_MERGE_BATCH)
        if wide:
            reply = merge(keys=merge_keys, args=[DELTA_MERGE_BATCH, *rule_args, cursor])
            remaining, cursor, merged_off = int(reply[0]), reply[1], reply[2:]
        else:
            reply = merge(keys=merge_keys, args=[DELTA_MERGE_BATCH, *rule_args])
            remaining, merged_off = int(reply[0]), reply[1:]
        left_off += [int(member) for member in merged_off]
        rounds += 1
    return seen + remaining, left_off
