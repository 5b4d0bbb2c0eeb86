"""Writes to the boards: rebuild from PostgreSQL, reconcile, corrections; the derived boards
(top-list snapshots, weekly boards).

Rebuild protocol (see leaderboard/lua/rebuild_*.lua and the ingestion apply script): the live
board stays in place while a temp board is filled from a PostgreSQL snapshot; results applied
meanwhile are kept aside (pending list, then delta board) and merged into the temp board
before it is RENAMEd over the live one, so nothing ingested during a rebuild is lost or
counted twice, and readers never see an empty or partial board.
"""

from __future__ import annotations

import hashlib
import json
import logging
import queue
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import NamedTuple, cast

import redis
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone

from ingestion.models import MatchResult
from ingestion.selectors import (
    board_days_with_results,
    board_member_count,
    board_players_sample,
    board_scores_for_players,
    board_scores_zadd_chunks,
)
from leaderboard import keys
from leaderboard.models import PlayerBan, RebuildRun, ReconcileRun, RunStatus
from leaderboard.redis import get_board_redis
from leaderboard.scripts import get_script
from leaderboard.selectors import TOP_SNAPSHOT_SIZE, ranked_entries
from seasons.models import (
    FinalStanding,
    GrantStatus,
    RewardGrant,
    RewardTier,
    ScoringRule,
    Season,
    SeasonStatus,
)
from seasons.selectors import (
    SeasonRef,
    StandingRow,
    season_list_active,
    season_standings_compute,
)
from seasons.services import final_standings_replace

logger = logging.getLogger(__name__)

# The marker outlives a crashed rebuild by at most this long; a running rebuild refreshes it.
MARKER_TTL_SECONDS = 600
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


@dataclass(frozen=True, slots=True)
class RebuildResult:
    season_id: int
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


def _board_keys(*, season_id: int, day: date | None) -> _BoardKeys:
    live = (
        keys.season_board(season_id=season_id)
        if day is None
        else keys.daily_board(season_id=season_id, day=day)
    )
    return _BoardKeys(
        live=live,
        temp=keys.rebuild_temp(board_key=live),
        marker=keys.rebuild_marker(board_key=live),
        pending=keys.rebuild_pending(board_key=live),
        delta=keys.rebuild_delta(board_key=live),
    )


_DONE = object()


def _read_snapshot_and_stream(
    *,
    season: Season,
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
                season=season, day=day, overflowed=overflowed, sorted_runs=REBUILD_SORTED_RUNS
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


def board_rebuild(
    *,
    season_id: int,
    day: date | None = None,
    progress: Callable[[int], None] | None = None,
    reason: str = "",
    zadd_batch: int = DEFAULT_ZADD_BATCH,
    on_phase: Callable[[str], None] | None = None,
) -> RebuildResult:
    """Rebuild the season board (or the board of UTC ``day``) from PostgreSQL.

    ``progress`` is called with the number of members each loaded chunk added; ``on_phase``
    with each PHASE_* as the protocol reaches it (PHASE_ACTIVATED from the reader thread).
    Raises RebuildInProgressError when the board is already being rebuilt.

    A player whose cumulative points overflow the codec is left off the board, never clamped,
    and listed in the result and on the RebuildRun (live ingestion leaves off the result that
    would overflow; see docs/operations.md).
    """
    started = time.monotonic()
    season = Season.objects.get(pk=season_id)
    codec = season.codec
    k = _board_keys(season_id=season_id, day=day)
    client = get_board_redis()
    rule_args: list[str | int] = [str(season.rule), codec.time_bits, codec.max_points]

    if not get_script(client, "rebuild_begin")(
        keys=[k.marker, k.pending, k.delta, k.temp], args=[MARKER_TTL_SECONDS]
    ):
        raise RebuildInProgressError(f"board {k.live} is already being rebuilt")
    run = RebuildRun.objects.create(season_id=season_id, day=day, reason=reason[:200])
    snapshot: list[str] = []
    overflowed: list[int] = []

    def activate(snap: str) -> None:
        get_script(client, "rebuild_activate")(
            keys=[k.marker, k.pending, k.delta], args=[snap, *rule_args, MARKER_TTL_SECONDS]
        )
        snapshot.append(snap)

    out: queue.Queue[object] = queue.Queue(maxsize=PREFETCH_CHUNKS)
    stop = threading.Event()
    producer = threading.Thread(
        target=_read_snapshot_and_stream,
        kwargs={
            "season": season,
            "day": day,
            "on_snapshot": activate,
            "on_phase": on_phase,
            "out": out,
            "stop": stop,
            "overflowed": overflowed,
        },
        name=f"rebuild-reader-{season_id}",
        daemon=True,
    )
    try:
        if on_phase is not None:
            on_phase(PHASE_PENDING)
        producer.start()
        loaded = _load_temp(
            client, k, _chunks_from(out, producer), zadd_batch=zadd_batch, progress=progress
        )
        if on_phase is not None:
            on_phase(PHASE_LOADED)
        delta_seen, merged_off = _merge_delta(client, k, rule_args)
        overflowed += merged_off
        if on_phase is not None:
            on_phase(PHASE_MERGED)
        ttl_ms = 0
        if day is not None:
            now = timezone.now()
            ttl_ms = max(1, daily_board_expire_at(day=day, now=now) - int(now.timestamp())) * 1000
        finished = get_script(client, "rebuild_finish")(
            keys=[k.temp, k.live, k.marker, k.pending, k.delta],
            args=[snapshot[0], *rule_args, ttl_ms],
        )
        size = int(finished[0])
        overflowed += [int(member) for member in finished[1:]]
    except BaseException as exc:
        stop.set()
        if producer.is_alive():
            producer.join(timeout=30)
        get_script(client, "rebuild_abort")(keys=[k.marker, k.pending, k.delta, k.temp])
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
        season_id=season_id,
        day=day,
        board_key=k.live,
        members=size,
        loaded=loaded,
        delta_members=delta_seen,
        seconds=time.monotonic() - started,
        overflowed=left_off,
    )


def _load_temp(
    client: redis.Redis,
    k: _BoardKeys,
    chunks: Iterator[list[bytes]],
    *,
    zadd_batch: int,
    progress: Callable[[int], None] | None,
) -> int:
    """Plain ZADDs of the snapshot's scores into the temp board, one pipeline per chunk."""
    step = 2 * zadd_batch
    loaded = 0
    for flat in chunks:
        pipe = client.pipeline(transaction=False)
        for start in range(0, len(flat), step):
            pipe.execute_command("ZADD", k.temp, *flat[start : start + step])
        # Keep the marker alive (and a crashed rebuild's temp board from lingering forever).
        pipe.expire(k.marker, MARKER_TTL_SECONDS)
        pipe.expire(k.temp, MARKER_TTL_SECONDS)
        replies = pipe.execute()
        if not replies[-2]:
            raise RuntimeError(f"rebuild marker of {k.live} vanished during loading")
        members = len(flat) // 2
        loaded += members
        if progress is not None:
            progress(members)
    return loaded


def _merge_delta(
    client: redis.Redis, k: _BoardKeys, rule_args: list[str | int]
) -> tuple[int, list[int]]:
    """Merge the delta into the temp board in short script calls; the finish takes the rest.

    Returns how many delta members were merged here (ingestion may add more meanwhile, so
    this stops once the remainder is small enough for one atomic finishing call), and the
    players left off because their cumulative points overflow.
    """
    merge = get_script(client, "rebuild_merge_delta")
    seen = 0
    left_off: list[int] = []
    remaining = int(client.zcard(k.delta))
    rounds = 0
    while remaining > DELTA_MERGE_BATCH and rounds < 1000:
        seen += min(remaining, DELTA_MERGE_BATCH)
        reply = merge(keys=[k.delta, k.temp], args=[DELTA_MERGE_BATCH, *rule_args])
        remaining = int(reply[0])
        left_off += [int(member) for member in reply[1:]]
        rounds += 1
    return seen + remaining, left_off


# --- derived boards: top-list snapshots and weekly boards -------------------------------------
#
# Projections of the boards ingestion maintains; losing them loses nothing (the read path falls
# back to the live board, and a weekly board is rebuilt from the daily boards).

# Entries merged per script call when building a cumulative weekly board: each call blocks
# Redis, so it stays short.
WEEKLY_MERGE_CHUNK = 5000


class WeeklyBuildError(RuntimeError):
    """A weekly board could not be built (e.g. a cumulative sum overflows the codec)."""


def top_snapshot_refresh(*, season: SeasonRef) -> int:
    """Store the season's top entries, encoded once, for every API process to serve.

    One ZREVRANGE; the ranks are derived here (the slice starts at rank 1). Returns the
    number of entries stored.
    """
    client = get_board_redis()
    # Scores stay as Redis sends them: a float cast would be exact too, but the codec and
    # the rank derivation compare the exact strings.
    pairs = client.zrevrange(
        keys.season_board(season_id=season.id),
        0,
        TOP_SNAPSHOT_SIZE - 1,
        withscores=True,
        score_cast_func=bytes,
    )
    flat = [cast(bytes, item) for pair in pairs for item in pair]
    entries = ranked_entries(flat=flat, start=0, first_rank=1, codec=season.codec)
    rows = [[entry.rank, entry.player_id, entry.points] for entry in entries]
    rows_json = json.dumps(rows, separators=(",", ":"))
    body = {
        "seasonId": season.id,
        "generatedAt": time.time(),
        "version": hashlib.blake2b(rows_json.encode(), digest_size=8).hexdigest(),
        "entries": rows,
    }
    client.set(
        keys.top_snapshot(season_id=season.id),
        json.dumps(body, separators=(",", ":")),
        ex=settings.LEADERBOARD_TOP_SNAPSHOT_TTL_SECONDS,
    )
    return len(entries)


def _live_seasons() -> list[SeasonRef]:
    # Closing seasons still move while the consumer drains their last results.
    return [SeasonRef.from_model(season) for season in season_list_active(include_closing=True)]


def top_snapshots_refresh() -> dict[int, int]:
    """Refresh the snapshot of every live season; {season id: entries stored}."""
    refreshed: dict[int, int] = {}
    for season in _live_seasons():
        try:
            refreshed[season.id] = top_snapshot_refresh(season=season)
        except Exception:
            # One season's failure must not starve the others of their refresh.
            logger.exception("top snapshot refresh failed for season %s", season.id)
    return refreshed


def _week_days(*, iso_year: int, iso_week: int) -> list[date]:
    monday = date.fromisocalendar(iso_year, iso_week, 1)
    return [monday + timedelta(days=offset) for offset in range(7)]


def weekly_board_build(*, season: SeasonRef, iso_year: int, iso_week: int) -> int:
    """(Re)build an ISO week's board from its daily boards; returns its number of players.

    best: ZUNIONSTORE ... AGGREGATE MAX (the higher composite keeps the earliest time).
    cumulative: each daily board is frozen with COPY and merged chunk by chunk by a script
    that adds points and keeps the latest time (see weekly_cumulative_merge.lua). Either way
    the result lands in a private key that replaces the weekly board atomically.
    """
    client = get_board_redis()
    weekly = keys.weekly_board(season_id=season.id, iso_year=iso_year, iso_week=iso_week)
    dailies = [
        keys.daily_board(season_id=season.id, day=day)
        for day in _week_days(iso_year=iso_year, iso_week=iso_week)
    ]
    token = uuid.uuid4().hex
    build = keys.weekly_build_temp(board_key=weekly, token=token)
    ttl = settings.LEADERBOARD_WEEKLY_BOARD_TTL_SECONDS
    try:
        if season.rule == ScoringRule.BEST:
            client.zunionstore(build, dailies, aggregate="MAX")
        else:
            source = keys.weekly_build_source(board_key=weekly, token=token)
            _cumulative_merge(
                client=client, season=season, dailies=dailies, source=source, build=build
            )
        size = get_script(client, "weekly_publish")(keys=[build, weekly], args=[ttl])
    finally:
        client.unlink(build)
    return int(size)


def _cumulative_merge(
    *, client: redis.Redis, season: SeasonRef, dailies: list[str], source: str, build: str
) -> None:
    merge = get_script(client, "weekly_cumulative_merge")
    codec = season.codec
    try:
        for daily in dailies:
            # A frozen copy: today's board moves while it is merged, and a moving index
            # would skip or double-count players.
            if not client.copy(daily, source, replace=True):
                continue
            start = 0
            while True:
                try:
                    merged = int(
                        merge(
                            keys=[source, build],
                            args=[
                                start,
                                start + WEEKLY_MERGE_CHUNK - 1,
                                codec.time_bits,
                                codec.max_points,
                            ],
                        )
                    )
                except Exception as exc:
                    raise WeeklyBuildError(f"weekly board of season {season.id}: {exc}") from exc
                if merged < WEEKLY_MERGE_CHUNK:
                    break
                start += WEEKLY_MERGE_CHUNK
    finally:
        client.unlink(source)


def weekly_board_ensure(*, season: SeasonRef, iso_year: int, iso_week: int, today: date) -> bool:
    """Build a week's board on demand when it is missing; True if this call built it.

    Only weeks that have started and overlap the season are built. A lock keeps concurrent
    requests from piling up builds; the ones that don't get it read what is there.
    """
    days = _week_days(iso_year=iso_year, iso_week=iso_week)
    if days[0] > today or days[-1] < season.starts_at.date() or days[0] > season.ends_at.date():
        return False
    client = get_board_redis()
    weekly = keys.weekly_board(season_id=season.id, iso_year=iso_year, iso_week=iso_week)
    if client.exists(weekly):
        return False
    lock = keys.weekly_build_lock(board_key=weekly)
    if not client.set(lock, "1", nx=True, ex=60):
        return False
    try:
        weekly_board_build(season=season, iso_year=iso_year, iso_week=iso_week)
    finally:
        client.delete(lock)
    return True


def weekly_boards_build(*, now: datetime) -> dict[str, int]:
    """Rebuild the current ISO week's board of every live season (and, on Mondays, the
    previous week's, which may still have received late results for Sunday)."""
    today = now.date()
    weeks = [today.isocalendar()[:2]]
    if today.isoweekday() == 1:
        weeks.append((today - timedelta(days=7)).isocalendar()[:2])
    built: dict[str, int] = {}
    for season in _live_seasons():
        for iso_year, iso_week in weeks:
            try:
                built[f"{season.id}:{iso_year}-W{iso_week:02d}"] = weekly_board_build(
                    season=season, iso_year=iso_year, iso_week=iso_week
                )
            except Exception:
                logger.exception("weekly board build failed for season %s", season.id)
    return built


# --- Ingestion: applying results to the boards ----------------------------------------------


class CountedResult(NamedTuple):
    """One stored result that must now count on its season's board and daily board.

    A NamedTuple (immutable, typed) rather than a frozen dataclass: one is built per ingested
    result, and it is about three times cheaper to build.
    """

    partition: int
    offset: int
    season_id: int
    player_id: int
    points: int
    ticks: int
    day: date  # the UTC day of achieved_at
    xid: int  # the PostgreSQL transaction that stored it (rebuild protocol)


@dataclass(frozen=True, slots=True)
class BoardsApplied:
    applied: int  # results now on the boards
    already_applied: int  # dropped: another consumer of the partition had applied them
    overflowed: tuple[str, ...]  # "board member" pairs whose cumulative sum the codec can't hold


def daily_board_expire_at(*, day: date, now: datetime) -> int:
    """When a daily board expires: TTL days after its day ends (or after a late write to it).

    Kept past the day itself so the weekly board of its ISO week can still be built from it.
    """
    end_of_day = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1)
    ttl = timedelta(days=settings.LEADERBOARD_DAILY_TTL_DAYS)
    return int((max(end_of_day, now) + ttl).timestamp())


class _BoardNames:
    """Board keys of one batch, built once per season and per (season, day)."""

    def __init__(self) -> None:
        self._season: dict[int, str] = {}
        self._daily: dict[tuple[int, date], str] = {}

    def of(self, r: CountedResult) -> tuple[str, str]:
        season_key = self._season.get(r.season_id)
        if season_key is None:
            season_key = self._season[r.season_id] = keys.season_board(season_id=r.season_id)
        daily_key = self._daily.get((r.season_id, r.day))
        if daily_key is None:
            daily_key = self._daily[(r.season_id, r.day)] = keys.daily_board(
                season_id=r.season_id, day=r.day
            )
        return season_key, daily_key


def _collapse(
    results: Sequence[CountedResult], seasons: Mapping[int, Season], names: _BoardNames
) -> dict[tuple[str, int, int], tuple[int, int]]:
    """One write per (board, player, xid): the batch's contribution under the season's rule.

    xid stays in the key because a rebuild running meanwhile must see each transaction's results
    apart (a cumulative sum mixing counted and uncounted ones would double the counted part).
    """
    merged: dict[tuple[str, int, int], tuple[int, int]] = {}
    for r in results:
        best = seasons[r.season_id].rule == ScoringRule.BEST
        for board in names.of(r):
            slot = (board, r.player_id, r.xid)
            old = merged.get(slot)
            if old is None:
                merged[slot] = (r.points, r.ticks)
            elif best:
                if r.points > old[0] or (r.points == old[0] and r.ticks < old[1]):
                    merged[slot] = (r.points, r.ticks)
            else:
                merged[slot] = (old[0] + r.points, max(old[1], r.ticks))
    return merged


def _script_args(
    *,
    partition: int,
    results: Sequence[CountedResult],
    handled_offset: int,
    seasons: Mapping[int, Season],
) -> tuple[list[str], list[str], list[str | int]]:
    """(board keys in script order, KEYS after the watermark, ARGV) of one partition's call."""
    names = _BoardNames()
    boards: dict[str, tuple[Season, date | None]] = {}
    for r in results:
        season_key, daily_key = names.of(r)
        if daily_key not in boards:
            season = seasons[r.season_id]
            boards[season_key] = (season, None)
            boards[daily_key] = (season, r.day)
    now = datetime.now(UTC)
    index: dict[str, int] = {}
    key_args: list[str] = []
    board_args: list[str | int] = []
    for n, (board, (season, day)) in enumerate(boards.items(), start=1):
        index[board] = n
        key_args += [
            board,
            keys.rebuild_marker(board_key=board),
            keys.rebuild_pending(board_key=board),
            keys.rebuild_delta(board_key=board),
        ]
        expire_at = 0 if day is None else daily_board_expire_at(day=day, now=now)
        board_args += [season.rule, season.time_bits, season.codec.max_points, expire_at]
    entries = ";".join(
        f"{index[board]} {player} {points} {ticks} {xid}"
        for (board, player, xid), (points, ticks) in _collapse(results, seasons, names).items()
    )
    head: list[str | int] = [partition, min(r.offset for r in results), handled_offset, len(boards)]
    return list(boards), key_args, [*head, *board_args, entries]


def board_results_apply(
    *,
    topic: str,
    results: Sequence[CountedResult],
    handled_offsets: Mapping[int, int],
    seasons: Mapping[int, Season],
) -> BoardsApplied:
    """Put results on their season and daily boards, exactly once per Kafka offset.

    ``handled_offsets`` maps each partition in the batch to the highest offset the caller has
    dealt with (applied, rejected or found to be a duplicate). One script call per partition,
    all pipelined: each call checks the partition's applied-offset watermark, writes the boards
    and moves the watermark atomically (docs/ingestion.md).
    """
    client = get_board_redis()
    script = get_script(client, "apply_results")
    watermark = keys.ingest_applied_offsets(topic=topic)
    by_partition: dict[int, list[CountedResult]] = defaultdict(list)
    for r in results:
        by_partition[r.partition].append(r)
    applied = 0
    already = 0
    overflowed: list[str] = []
    while by_partition:
        pipe = client.pipeline(transaction=False)
        order = sorted(by_partition)
        board_names: list[list[str]] = []
        for partition in order:
            names, key_args, args = _script_args(
                partition=partition,
                results=by_partition[partition],
                handled_offset=handled_offsets[partition],
                seasons=seasons,
            )
            board_names.append(names)
            script(keys=[watermark, *key_args], args=args, client=pipe)
        replies = pipe.execute()
        retry: dict[int, list[CountedResult]] = {}
        for partition, names, reply in zip(order, board_names, replies, strict=True):
            batch = by_partition[partition]
            if int(reply[0]) == 1:
                applied += len(batch)
                for slot in reply[2:]:
                    board_index, member = slot.decode().split(" ", 1)
                    overflowed.append(f"{names[int(board_index) - 1]} {member}")
                continue
            # Another consumer (the partition moved during a rebalance) applied part of it.
            applied_offset = int(reply[1])
            remaining = [r for r in batch if r.offset > applied_offset]
            already += len(batch) - len(remaining)
            if remaining:
                retry[partition] = remaining
        by_partition = defaultdict(list, retry)
    if overflowed:
        logger.error(
            "cumulative points overflow the codec; results left off the board: %s", overflowed
        )
    return BoardsApplied(applied=applied, already_applied=already, overflowed=tuple(overflowed))


# --- reconcile -----------------------------------------------------------------------------------

DEFAULT_RECONCILE_SAMPLE = 200
# Kept on the run record for staff; the count of mismatches is always exact.
MISMATCH_EXAMPLES = 20


@dataclass(frozen=True, slots=True)
class ReconcileResult:
    season_id: int
    day: date | None
    # None when the board was being rebuilt and the comparison was skipped.
    run_id: int | None
    drift_found: bool
    rebuilt: bool


def _compare(
    client: redis.Redis, *, season: Season, day: date | None, key: str, players: list[int]
) -> tuple[int, int, list[dict[str, int | None]]]:
    """(redis members, expected members, mismatching sampled players)."""
    redis_members = int(client.zcard(key))
    expected_members = board_member_count(season=season, day=day)
    if not players:
        return redis_members, expected_members, []
    expected = board_scores_for_players(season=season, player_ids=players, day=day)
    actual = client.zmscore(key, [str(p) for p in players])
    mismatches: list[dict[str, int | None]] = []
    for player, got in zip(players, actual, strict=True):
        want = expected.get(player)
        have = None if got is None else int(got)
        if have != (None if want is None else want.score):
            mismatches.append(
                {"player_id": player, "redis": have, "expected": want.score if want else None}
            )
    return redis_members, expected_members, mismatches


def board_reconcile(
    *,
    season_id: int,
    day: date | None = None,
    sample_size: int = DEFAULT_RECONCILE_SAMPLE,
    repair: bool = True,
) -> ReconcileResult:
    """Compare a board in Redis with PostgreSQL; record the drift; rebuild the board if any.

    The sample mixes players drawn from PostgreSQL (missing or wrong on the board) and from
    Redis (present but not counted, e.g. a voided result or a banned player). A result
    committed but not yet applied looks like drift for a moment, so a drift is confirmed by
    a second look at the same players before it counts.
    """
    season = Season.objects.get(pk=season_id)
    client = get_board_redis()
    k = _board_keys(season_id=season_id, day=day)
    if client.exists(k.marker):
        return ReconcileResult(season_id, day, None, drift_found=False, rebuilt=False)
    half = max(1, sample_size // 2)
    from_pg = board_players_sample(season=season, size=half, day=day)
    raw_members = cast(list[bytes], client.zrandmember(k.live, half) or [])
    from_redis = [int(m) for m in raw_members]
    players = sorted(set(from_pg) | set(from_redis))

    redis_members, expected_members, mismatches = _compare(
        client, season=season, day=day, key=k.live, players=players
    )
    if mismatches or redis_members != expected_members:
        recheck = [int(m["player_id"] or 0) for m in mismatches]
        redis_members, expected_members, mismatches = _compare(
            client, season=season, day=day, key=k.live, players=recheck
        )
    drift = bool(mismatches) or redis_members != expected_members
    run = ReconcileRun.objects.create(
        season_id=season_id,
        day=day,
        redis_members=redis_members,
        expected_members=expected_members,
        sample_size=len(players),
        mismatched_scores=len(mismatches),
        mismatch_examples=mismatches[:MISMATCH_EXAMPLES],
        drift_found=drift,
    )
    rebuilt = False
    if drift and repair:
        try:
            board_rebuild(season_id=season_id, day=day, reason=f"reconcile #{run.pk}")
            rebuilt = True
        except RebuildInProgressError:
            rebuilt = False
        ReconcileRun.objects.filter(pk=run.pk).update(rebuilt=rebuilt)
    return ReconcileResult(season_id, day, run.pk, drift_found=drift, rebuilt=rebuilt)


def reconcile_days(*, season: Season, today: date) -> list[date]:
    """The daily boards a reconcile covers: the current ISO week's days within the season
    (what weekly boards are built from; older daily boards expire anyway)."""
    first = max(season.starts_at.astimezone(UTC).date(), today - timedelta(days=today.weekday()))
    last = min(season.ends_at.astimezone(UTC).date(), today)
    return [first + timedelta(days=n) for n in range((last - first).days + 1)]


def boards_reconcile_live_seasons(
    *, now: datetime, sample_size: int = DEFAULT_RECONCILE_SAMPLE
) -> list[ReconcileResult]:
    """Reconcile the season board and this week's daily boards of every running season."""
    results: list[ReconcileResult] = []
    # Closing seasons still move while the consumer drains their last results.
    for season in season_list_active(include_closing=True):
        results.append(board_reconcile(season_id=season.id, sample_size=sample_size))
        for day in reconcile_days(season=season, today=now.astimezone(UTC).date()):
            results.append(board_reconcile(season_id=season.id, day=day, sample_size=sample_size))
    return results


# --- corrections: voids and bans ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BoardsCorrected:
    season_id: int
    rebuilt: tuple[str, ...]  # board keys rebuilt from PostgreSQL (season, daily, weekly)
    # A closed season has no live boards: its final standings and grants need a review instead
    # (season_standings_review / season_standings_correct).
    needs_standings_review: bool

    def describe(self) -> str:
        if self.needs_standings_review:
            return (
                f"season {self.season_id} is closed: review the corrected final standings and "
                "grants (season action) before they apply"
            )
        return f"season {self.season_id}: {len(self.rebuilt)} board(s) rebuilt"


def boards_correct(*, season_id: int, days: Iterable[date]) -> BoardsCorrected:
    """Rebuild what a correction touched: the season board, the given days' daily boards that
    exist, and the weekly boards that exist for those days' weeks.

    Raises RebuildInProgressError when one of them is being rebuilt: that rebuild may read a
    snapshot from before the correction, so the caller retries (the task does) rather than
    skip it.
    """
    season = Season.objects.get(pk=season_id)
    if season.status == SeasonStatus.CLOSED:
        return BoardsCorrected(season_id, (), needs_standings_review=True)
    client = get_board_redis()
    rebuilt = [board_rebuild(season_id=season_id, reason="correction").board_key]
    # A daily board that expired stays expired: nothing reads it any more.
    existing = [
        d for d in sorted(set(days)) if client.exists(keys.daily_board(season_id=season_id, day=d))
    ]
    for day in existing:
        rebuilt.append(board_rebuild(season_id=season_id, day=day, reason="correction").board_key)
    rebuilt += _weekly_boards_rebuild(client, season=season, days=days)
    return BoardsCorrected(season_id, tuple(rebuilt), needs_standings_review=False)


def _weekly_boards_rebuild(
    client: redis.Redis, *, season: Season, days: Iterable[date]
) -> list[str]:
    """Rebuild the weekly boards that exist for the weeks of ``days`` from the daily boards."""
    weeks = {(d.isocalendar().year, d.isocalendar().week) for d in days}
    ref = SeasonRef.from_model(season)
    rebuilt: list[str] = []
    for iso_year, iso_week in sorted(weeks):
        weekly = keys.weekly_board(season_id=season.id, iso_year=iso_year, iso_week=iso_week)
        # A missing weekly board is built on demand from the (now corrected) daily boards.
        if client.exists(weekly):
            weekly_board_build(season=ref, iso_year=iso_year, iso_week=iso_week)
            rebuilt.append(weekly)
    return rebuilt


def daily_boards_existing(*, season_id: int) -> list[date]:
    """The days whose daily board is in Redis now (SCAN; rebuild leftovers filtered out)."""
    client = get_board_redis()
    days = set()
    for raw in client.scan_iter(match=keys.daily_board_pattern(season_id=season_id), count=1000):
        key = raw.decode() if isinstance(raw, bytes) else str(raw)
        day = keys.daily_board_day(season_id=season_id, key=key)
        if day is not None:
            days.add(day)
    return sorted(days)


@dataclass(frozen=True, slots=True)
class SeasonBoardsRebuilt:
    season_id: int
    season_board: RebuildResult
    daily_boards: tuple[RebuildResult, ...]
    weekly_boards: tuple[str, ...]  # keys of the weekly boards rebuilt from the daily ones

    def describe(self) -> str:
        overflowed = {p for r in (self.season_board, *self.daily_boards) for p in r.overflowed}
        text = (
            f"season {self.season_id}: season board rebuilt ({self.season_board.members} "
            f"players), {len(self.daily_boards)} daily and {len(self.weekly_boards)} weekly "
            "board(s)"
        )
        if overflowed:
            text += f"; {len(overflowed)} player(s) left off for overflowing the codec"
        return text


def season_boards_rebuild(
    *,
    season_id: int,
    all_days: bool = False,
    reason: str = "",
    progress: Callable[[str], Callable[[int], None] | None] | None = None,
) -> SeasonBoardsRebuilt:
    """Rebuild the season board, then its daily boards, then the weekly boards built from them.

    Daily boards: those in Redis now; with ``all_days`` also every day with a counted result
    (boards that had expired come back, with the default daily expiry). ``progress(board)``
    may return a per-board progress callback (the command's bars).
    Raises RebuildInProgressError when one of the boards is being rebuilt.
    """
    season = Season.objects.get(pk=season_id)
    client = get_board_redis()

    def bar(board: str) -> Callable[[int], None] | None:
        return progress(board) if progress is not None else None

    season_result = board_rebuild(season_id=season_id, reason=reason, progress=bar("season"))
    days = set(daily_boards_existing(season_id=season_id))
    if all_days:
        days.update(board_days_with_results(season=season))
    daily = tuple(
        board_rebuild(season_id=season_id, day=day, reason=reason, progress=bar(day.isoformat()))
        for day in sorted(days)
    )
    weekly = _weekly_boards_rebuild(client, season=season, days=days)
    return SeasonBoardsRebuilt(season_id, season_result, daily, tuple(weekly))


@dataclass(frozen=True, slots=True)
class Correction:
    season_id: int
    days: tuple[date, ...]  # the UTC days whose boards the correction touches
    changed: bool  # False when it was already in effect (voided before, banned before)


def match_result_void(*, result_id: int, reason: str) -> Correction:
    """Void a result: it stays for audit, no longer counts. The boards are corrected by
    boards_correct (the caller queues it: a season board rebuild is not a request's work)."""
    reason = reason.strip()
    if not reason:
        raise ValidationError("a void needs a reason")
    with transaction.atomic():
        result = MatchResult.objects.select_for_update().get(pk=result_id)
        changed = result.voided_at is None
        if changed:
            result.voided_at = timezone.now()
            result.void_reason = reason[:500]
            result.save(update_fields=["voided_at", "void_reason"])
    return Correction(result.season_id, (result.achieved_at.astimezone(UTC).date(),), changed)


def player_ban(
    *, season_id: int, player_id: int, reason: str, created_by_id: int | None = None
) -> Correction:
    """Ban a player from a season: none of their results count. Boards: see boards_correct."""
    reason = reason.strip()
    if not reason:
        raise ValidationError("a ban needs a reason")
    if player_id <= 0:
        raise ValidationError(f"player ids are positive integers, got {player_id}")
    _, created = PlayerBan.objects.get_or_create(
        season_id=season_id,
        player_id=player_id,
        defaults={"reason": reason[:500], "created_by_id": created_by_id},
    )
    return Correction(season_id, _player_days(season_id=season_id, player_id=player_id), created)


def player_unban(*, season_id: int, player_id: int) -> Correction:
    deleted, _ = PlayerBan.objects.filter(season_id=season_id, player_id=player_id).delete()
    days = _player_days(season_id=season_id, player_id=player_id)
    return Correction(season_id, days, bool(deleted))


def _player_days(*, season_id: int, player_id: int) -> tuple[date, ...]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT (achieved_at AT TIME ZONE 'UTC')::date FROM ingestion_matchresult"
            " WHERE season_id = %s AND player_id = %s ORDER BY 1",
            [season_id, player_id],
        )
        return tuple(row[0] for row in cursor.fetchall())


# --- corrections of a closed season: standings and grants, reviewed before they apply -----------


@dataclass(frozen=True, slots=True)
class StandingChange:
    player_id: int
    old_rank: int | None
    new_rank: int | None
    old_points: int | None
    new_points: int | None


@dataclass(frozen=True, slots=True)
class GrantChange:
    player_id: int
    action: str  # "grant", "revoke", "reinstate", "change"
    old: str  # "#3 2 x gems (delivered)" or ""
    new: str


@dataclass(frozen=True, slots=True)
class StandingsReview:
    season_id: int
    standings: tuple[StandingChange, ...]
    grants: tuple[GrantChange, ...]
    # Identifies exactly these changes: applying checks it, so staff apply what they reviewed.
    fingerprint: str

    @property
    def has_changes(self) -> bool:
        return bool(self.standings or self.grants)


def _grant_label(*, rank: int, tier: RewardTier | None, name: str, quantity: int) -> str:
    return f"#{rank} {quantity} x {name}" + ("" if tier else " (tier deleted)")


def _standings_plan(
    season: Season,
) -> tuple[list[StandingRow], dict[int, tuple[RewardTier, StandingRow]], StandingsReview]:
    rows = season_standings_compute(season=season, limit=settings.FINAL_STANDINGS_SIZE)
    old = {s.player_id: s for s in FinalStanding.objects.filter(season=season)}
    new = {r.player_id: r for r in rows}
    standing_changes = []
    for player in sorted(set(old) | set(new)):
        o, n = old.get(player), new.get(player)
        if o and n and (o.rank, o.points, o.reached_at) == (n.rank, n.points, n.reached_at):
            continue
        standing_changes.append(
            StandingChange(
                player,
                o.rank if o else None,
                n.rank if n else None,
                o.points if o else None,
                n.points if n else None,
            )
        )
    standing_changes.sort(key=lambda c: (c.new_rank or 10**12, c.old_rank or 10**12))
    wanted: dict[int, tuple[RewardTier, StandingRow]] = {}
    for tier in RewardTier.objects.filter(season=season).order_by("rank_from"):
        for row in rows[tier.rank_from - 1 : tier.rank_to]:
            wanted[row.player_id] = (tier, row)
    grants = {g.player_id: g for g in RewardGrant.objects.filter(season=season)}
    grant_changes = []
    for player in sorted(set(wanted) | set(grants)):
        g = grants.get(player)
        w = wanted.get(player)
        old_label = (
            _grant_label(rank=g.rank, tier=g.tier, name=g.reward_name, quantity=g.quantity)
            + f" ({g.status})"
            if g
            else ""
        )
        if w is None:
            if g and g.status != GrantStatus.REVOKED:
                grant_changes.append(GrantChange(player, "revoke", old_label, ""))
            continue
        tier, row = w
        new_label = _grant_label(
            rank=row.rank, tier=tier, name=tier.reward_name, quantity=tier.quantity
        )
        if g is None:
            grant_changes.append(GrantChange(player, "grant", "", new_label))
        elif g.status == GrantStatus.REVOKED:
            grant_changes.append(GrantChange(player, "reinstate", old_label, new_label))
        elif (g.rank, g.tier_id) != (row.rank, tier.id):
            grant_changes.append(GrantChange(player, "change", old_label, new_label))
    digest = hashlib.sha256(repr((standing_changes, grant_changes)).encode()).hexdigest()[:16]
    review = StandingsReview(season.id, tuple(standing_changes), tuple(grant_changes), digest)
    return rows, wanted, review


def season_standings_review(*, season_id: int) -> StandingsReview:
    """What a closed season's final standings and grants become after voids and bans."""
    season = Season.objects.get(pk=season_id)
    if season.status != SeasonStatus.CLOSED:
        raise ValidationError(f"season {season_id} is {season.status}, not closed")
    return _standings_plan(season)[2]


@transaction.atomic
def season_standings_correct(*, season_id: int, fingerprint: str) -> StandingsReview:
    """Apply the reviewed changes; refuses if they are no longer what staff reviewed."""
    season = Season.objects.select_for_update().get(pk=season_id)
    if season.status != SeasonStatus.CLOSED:
        raise ValidationError(f"season {season_id} is {season.status}, not closed")
    rows, wanted, review = _standings_plan(season)
    if review.fingerprint != fingerprint:
        raise ValidationError("the corrections changed since the review: review them again")
    final_standings_replace(season=season, rows=rows)
    grants = {g.player_id: g for g in RewardGrant.objects.filter(season=season)}
    for change in review.grants:
        g = grants.get(change.player_id)
        if change.action == "revoke" and g is not None:
            g.status = GrantStatus.REVOKED
            g.save(update_fields=["status", "updated_at"])
            continue
        tier, row = wanted[change.player_id]
        if g is None:
            g = RewardGrant(season=season, player_id=change.player_id)
        if change.action == "reinstate":
            g.status = GrantStatus.PENDING
        g.tier, g.rank = tier, row.rank
        g.reward_name, g.quantity = tier.reward_name, tier.quantity
        g.save()
    return review
