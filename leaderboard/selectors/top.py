"""The top list of a board.

It is served from a snapshot that ``leaderboard.tasks.refresh_top_snapshots`` writes every
second; each process keeps it in memory and checks its version in Redis at most once per
``LEADERBOARD_TOP_SNAPSHOT_READ_INTERVAL_SECONDS`` (sooner when a client has seen a newer one).
A missing or stale snapshot falls back to the live board, so a late task never yields an empty
list. Every top list carries a version on the Redis clock, and a process never serves an older
one than it served before.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from cachetools import LRUCache
from django.conf import settings

from seasons.memo import process_state_register

from .. import keys
from ..redis import get_board_read_redis, get_board_redis
from ..scripts import get_script, read_script_call
from ._guards import guard_keys
from .boards import BoardRef
from .rankings import (
    NOT_KEPT,
    BoardUnavailableError,
    RankingEntry,
    entries_adorned,
    ranked_entries,
)

logger = logging.getLogger(__name__)

# The snapshot holds this many entries, which is also the largest top list served.
TOP_SNAPSHOT_SIZE = 1000

TopSource = Literal["snapshot", "live"]


@dataclass(frozen=True, slots=True)
class TopList:
    entries: tuple[RankingEntry, ...]
    source: TopSource
    # When the board was as listed, in microseconds of the boards' Redis clock (board_top.lua),
    # whether the list comes from the snapshot or was read live: a larger version is a later
    # state of the board, and equal versions list equal entries.
    version: int


@dataclass(frozen=True, slots=True)
class TopSnapshot:
    board_id: int
    generated_at: float
    entries: tuple[RankingEntry, ...]
    version: int


@dataclass(frozen=True, slots=True)
class TopRead:
    """A board's top entries and the Redis clock at that read, taken in one script."""

    version: int
    # False when Redis may have lost the board (its intact key is missing): no entries then.
    intact: bool
    entries: tuple[RankingEntry, ...]


def board_top_read(*, board: BoardRef, count: int) -> TopRead:
    """The board's top ``count`` entries with the Redis clock at that read, in one script on the
    board's master: a snapshot is taken with it, and a live top list is read with it, so their
    versions come from one clock and order them as the board's states (docs/read-api.md).
    The entries carry their names, read from the name cache just after (one more round trip),
    and on a board that keeps metadata their metadata (one PostgreSQL statement): the snapshot
    stores both, so a top list served from it costs neither."""
    script = "wide_board_top" if board.tiebreaks else "board_top"
    seconds, micros, intact, flat = get_script(get_board_redis(), script)(
        keys=[keys.board(board_id=board.id), *guard_keys(board)], args=[count]
    )
    entries = ranked_entries(flat=flat, start=0, first_rank=1, board=board)
    return TopRead(
        version=int(seconds) * 1_000_000 + int(micros),
        intact=bool(int(intact)),
        entries=tuple(entries_adorned(board=board, entries=entries) if int(intact) else entries),
    )


def top_snapshot_row(entry: RankingEntry) -> list[Any]:
    """One entry as the snapshot stores it: ``[rank, player, points, name, country]``, then
    the metadata on a board that keeps metadata, then the tie-break values on a board with
    columns, then the tier on a league board, then the attempts on a board with max-attempts
    (a slot before one that is used holds false for metadata where none is kept and for the
    tier off a league, null for tie-break values where there are none: metadata is an object
    or null, a tier a name or null, never false)."""
    row: list[Any] = [entry.rank, entry.player_id, entry.points, entry.display_name, entry.country]
    league = entry.tier is not NOT_KEPT
    attempts = entry.attempts is not None
    if entry.metadata is not NOT_KEPT or entry.tiebreakers is not None or league or attempts:
        row.append(False if entry.metadata is NOT_KEPT else entry.metadata)
    if entry.tiebreakers is not None or league or attempts:
        row.append(entry.tiebreakers)
    if league or attempts:
        row.append(entry.tier if league else False)
    if attempts:
        row.append(entry.attempts)
    return row


def _top_snapshot_entry(row: list[Any]) -> RankingEntry:
    # A snapshot written before names were stored holds [rank, player, points]: no names,
    # until the next refresh (a second later) rewrites it.
    rank, player, points, *named = row
    name, country = [*named, None, None][:2]
    metadata = named[2] if len(named) > 2 else False
    tiebreakers = named[3] if len(named) > 3 else None
    return RankingEntry(
        rank=int(rank),
        player_id=int(player),
        points=int(points),
        display_name=None if name is None else str(name),
        country=None if country is None else str(country),
        metadata=NOT_KEPT if metadata is False else metadata,
        tiebreakers=None
        if tiebreakers is None
        else {str(k): int(v) for k, v in tiebreakers.items()},
        tier=named[4] if len(named) > 4 and named[4] is not False else NOT_KEPT,
        attempts=int(named[5]) if len(named) > 5 else None,
    )


def top_snapshot_decode(*, raw: bytes | str, board_id: int) -> TopSnapshot | None:
    """Parse a stored snapshot; None (and a warning) if it is unreadable or another board's."""
    try:
        body = json.loads(raw)
        snapshot = TopSnapshot(
            board_id=int(body["boardId"]),
            generated_at=float(body["generatedAt"]),
            entries=tuple(_top_snapshot_entry(row) for row in body["entries"]),
            version=int(body["version"]),
        )
    except (ValueError, KeyError, TypeError) as exc:
        logger.warning("unreadable top snapshot of board %s: %s", board_id, exc)
        return None
    if snapshot.board_id != board_id:
        logger.warning("top snapshot under board %s holds board %s", board_id, snapshot.board_id)
        return None
    return snapshot


@dataclass(slots=True)
class _TopState:
    """What one process knows of one board's top list."""

    # The newest snapshot version read from Redis (0: none yet), and that snapshot (None when
    # Redis had none: dropped for a board not intact, expired, or unreadable).
    version: int
    snapshot: TopSnapshot | None
    # The states' clock (time.monotonic) at the last check against Redis (-inf: never).
    checked_at: float
    # The newest version this process has served for the board, from the snapshot or live.
    served: int
    # The last live read of the board's top ``live_count`` and the states' clock at it: served
    # again, to a limit within it, while it is younger than the read interval and no older than
    # what must be served (see _board_top_live).
    live: TopList | None = None
    live_count: int = 0
    live_at: float = -math.inf


class TopListStates:
    """Per process, per board: the snapshot served from memory, and the versions that keep what
    the process serves from going backwards (a board's state only moves forward)."""

    def __init__(self, *, maxsize: int, clock: Callable[[], float] = time.monotonic) -> None:
        # The clock of the checks' times (a test drives its own).
        self.clock = clock
        self._states: LRUCache[int, _TopState] = LRUCache(maxsize=maxsize)
        # cachetools' caches are not thread-safe, and the states are updated in place.
        self._lock = threading.Lock()

    def get(self, board_id: int) -> _TopState:
        """A copy of the board's state (a fresh one if the process knows nothing of it)."""
        with self._lock:
            state = self._states.get(board_id)
            if state is None:
                return _TopState(version=0, snapshot=None, checked_at=-math.inf, served=0)
            return replace(state)

    def checked(
        self, board_id: int, *, at: float, version: int | None, snapshot: TopSnapshot | None
    ) -> _TopState:
        """Record a check against Redis: ``version`` None when Redis had no version (the
        snapshot is gone), else the stored version with its snapshot. A version older than the
        one held (a replica behind, or a concurrent check that saw a newer one) changes
        nothing but the time of the check."""
        with self._lock:
            state = self._states.get(board_id)
            if state is None:
                state = self._states[board_id] = _TopState(
                    version=0, snapshot=None, checked_at=at, served=0
                )
            state.checked_at = max(state.checked_at, at)
            if version is None:
                state.snapshot = None
            elif version > state.version:
                state.version, state.snapshot = version, snapshot
            return _TopState(state.version, state.snapshot, state.checked_at, state.served)

    def served(
        self, board_id: int, version: int, *, live: TopList | None = None, live_count: int = 0
    ) -> None:
        """Record a list served; ``live``: a live read of the top ``live_count``, kept."""
        with self._lock:
            state = self._states.get(board_id)
            if state is None:
                state = self._states[board_id] = _TopState(
                    version=0, snapshot=None, checked_at=-math.inf, served=0
                )
            state.served = max(state.served, version)
            if live is not None and (state.live is None or live.version > state.live.version):
                state.live, state.live_count, state.live_at = live, live_count, self.clock()

    def clear(self) -> None:
        with self._lock:
            self._states.clear()


_top_states = TopListStates(maxsize=1000)
process_state_register(_top_states)


def _top_snapshot_check(*, board_id: int, held: int) -> tuple[int | None, TopSnapshot | None]:
    """The stored version and, if newer than ``held``, its snapshot (one small script: the
    snapshot itself is read once per version, not once per check)."""
    reply = read_script_call(
        get_board_read_redis(),
        "top_snapshot_read",
        keys=[keys.top_snapshot(board_id=board_id), keys.top_snapshot_version(board_id=board_id)],
        args=[held],
    )
    if not reply:
        return None, None
    version = int(reply[0])
    if len(reply) == 1:
        return version, None
    raw = reply[1]
    return version, None if raw is None else top_snapshot_decode(raw=raw, board_id=board_id)


def _top_snapshot_fresh(snapshot: TopSnapshot | None) -> bool:
    return (
        snapshot is not None
        and time.time() - snapshot.generated_at <= settings.LEADERBOARD_TOP_SNAPSHOT_MAX_AGE_SECONDS
    )


def top_snapshot_get(*, board_id: int, at_least: int = 0) -> TopSnapshot | None:
    """The newest snapshot this process has read of the board, checked against Redis at most
    once per LEADERBOARD_TOP_SNAPSHOT_READ_INTERVAL_SECONDS, and at once when the one held would
    be served but is older than ``at_least`` (a version a client has already seen: a newer
    snapshot exists). Never an older snapshot than one read before."""
    now = _top_states.clock()
    state = _top_states.get(board_id)
    due = now - state.checked_at >= settings.LEADERBOARD_TOP_SNAPSHOT_READ_INTERVAL_SECONDS
    behind = _top_snapshot_fresh(state.snapshot) and state.version < at_least
    if due or behind:
        version, snapshot = _top_snapshot_check(board_id=board_id, held=state.version)
        state = _top_states.checked(board_id, at=now, version=version, snapshot=snapshot)
    return state.snapshot


def top_snapshot_memo_clear() -> None:
    _top_states.clear()


def board_top_get(*, board: BoardRef, limit: int, at_least: int = 0) -> TopList:
    """The top ``limit`` entries: from the snapshot when it is fresh and no older than any list
    this process served or the client saw (``at_least``, a version), else from the live board.

    Within one process the versions served never decrease; a client that passes the newest
    version it has seen never gets an older list (docs/read-api.md, "Versions").
    """
    # A version from the future is no client's: ignored rather than let it force live reads.
    horizon = (time.time() + settings.LEADERBOARD_TOP_SNAPSHOT_MAX_AGE_SECONDS) * 1_000_000
    floor = max(at_least if at_least <= horizon else 0, _top_states.get(board.id).served)
    snapshot = top_snapshot_get(board_id=board.id, at_least=floor)
    if (
        snapshot is not None
        and limit <= TOP_SNAPSHOT_SIZE
        and snapshot.version >= floor
        and _top_snapshot_fresh(snapshot)
    ):
        top = TopList(entries=snapshot.entries[:limit], source="snapshot", version=snapshot.version)
    else:
        # A fresh snapshot, only older than what must be served: the kept live list will do.
        behind = snapshot is not None and _top_snapshot_fresh(snapshot)
        top = _board_top_live(board=board, limit=limit, floor=floor, keep=behind)
    _top_states.served(board.id, top.version)
    return top


def _board_top_live(*, board: BoardRef, limit: int, floor: int, keep: bool) -> TopList:
    """The live top list; with ``keep`` (the snapshot is fresh but older than the floor), read
    at most once per read interval per process for a limit within the snapshot's. A live list
    raises the version the process serves past the snapshot being written: read on every
    request, one of them nearly always fell between a refresh's read and its pick-up, so under
    load the process never went back to snapshots. Kept, the last live list is as fresh as a
    snapshot (at most one interval old, its names too) and no older than anything served, and
    the next refresh, which reads after it, is served again. Without a fresh snapshot (none,
    or beat late) every request reads live, as before the snapshots existed (each read kept
    for the next request that may take it). Each read is of ``limit`` entries only."""
    state = _top_states.get(board.id)
    interval = settings.LEADERBOARD_TOP_SNAPSHOT_READ_INTERVAL_SECONDS
    live = state.live
    if (
        not keep
        or live is None
        or limit > state.live_count
        or live.version < floor
        or _top_states.clock() - state.live_at >= interval
    ):
        read = board_top_read(board=board, count=limit)
        if not read.intact:
            raise BoardUnavailableError(board)
        live = TopList(entries=read.entries, source="live", version=read.version)
        _top_states.served(board.id, live.version, live=live, live_count=limit)
        return live
    return TopList(entries=live.entries[:limit], source="live", version=live.version)


def top_snapshot_times_get(*, boards: list[BoardRef]) -> dict[int, float | None]:
    """When each board's top-list snapshot was written (unix time; None: no readable snapshot),
    read from Redis in one round trip (staff dashboard: a stale snapshot means beat is stuck)."""
    pipe = get_board_redis().pipeline(transaction=False)
    for board in boards:
        pipe.get(keys.top_snapshot(board_id=board.id))
    times: dict[int, float | None] = {}
    for board, raw in zip(boards, pipe.execute(), strict=True):
        snapshot = None if raw is None else top_snapshot_decode(raw=raw, board_id=board.id)
        times[board.id] = None if snapshot is None else snapshot.generated_at
    return times
