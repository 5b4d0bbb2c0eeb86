"""Reads on the boards: top lists, a player's standing, around a player, pages, friends.

Ranks are 1-based competition ranks on the composite score: players whose encoded scores are
identical (same points reached in the same tick) share a rank, and Redis's member-lexical
order among them never decides one. Every read that needs more than one command is one Lua
script, so its ranks come from a single board state.

The top list is served from a snapshot that ``leaderboard.tasks.refresh_top_snapshots``
writes every second; each process keeps it in memory and checks its version in Redis at most
once per ``LEADERBOARD_TOP_SNAPSHOT_READ_INTERVAL_SECONDS`` (sooner when a client has seen a
newer one). A missing or stale snapshot falls back to the live board, so a late task never
yields an empty list. Every top list carries a version on the Redis clock, and a process never
serves an older one than it served before.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any, Literal, cast

from cachetools import LRUCache
from django.conf import settings
from django.db.models import Count, OuterRef, QuerySet, Subquery

from seasons.memo import ProcessMemo, process_memo, process_state_register
from seasons.models import Season, SeasonStatus
from seasons.selectors import SeasonRef

from . import keys
from .codec import ScoreCodec
from .models import MAIN_BOARD, Board, BoardOrder, RebuildRun, ReconcileRun
from .redis import get_board_read_redis, get_board_redis, reads_from_replicas
from .scripts import ScriptCall, get_script, read_script_call, scripts_pipelined

logger = logging.getLogger(__name__)

# The snapshot holds this many entries, which is also the largest top list served.
TOP_SNAPSHOT_SIZE = 1000

TopSource = Literal["snapshot", "live"]


# --- boards ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BoardRef:
    """What the read path and the board services need of a board, detached from the ORM."""

    id: int
    slug: str
    name: str
    order: str
    rule: str
    codec: ScoreCodec
    season: SeasonRef

    @property
    def season_id(self) -> int:
        return self.season.id

    @property
    def ascending(self) -> bool:
        return self.order == BoardOrder.ASC

    @classmethod
    def from_model(cls, board: Board) -> BoardRef:
        return cls(
            id=board.id,
            slug=board.slug,
            name=board.name,
            order=board.order,
            rule=board.rule,
            codec=board.codec,
            season=SeasonRef.from_model(board.season),
        )


_boards: ProcessMemo[tuple[int, str], BoardRef | None] = process_memo(
    ttl_setting="LEADERBOARD_SEASON_CACHE_SECONDS",
    fallback_setting="LEADERBOARD_SEASON_FALLBACK_SECONDS",
)


def board_get_cached(*, season_id: int, slug: str = MAIN_BOARD) -> BoardRef | None:
    """The season's board ``slug``, or None if either does not exist; memoized per process for
    LEADERBOARD_SEASON_CACHE_SECONDS (a board's codec never changes; the season's status and
    dates only matter at that scale)."""

    def load() -> BoardRef | None:
        board = Board.objects.select_related("season").filter(season_id=season_id, slug=slug)
        found = board.first()
        return BoardRef.from_model(found) if found is not None else None

    return _boards.get((season_id, slug), load)


_board_lists: ProcessMemo[int, tuple[BoardRef, ...]] = process_memo(
    ttl_setting="LEADERBOARD_SEASON_CACHE_SECONDS",
    fallback_setting="LEADERBOARD_SEASON_FALLBACK_SECONDS",
)


def board_list_cached(*, season_id: int) -> tuple[BoardRef, ...]:
    """``board_list`` memoized per process like ``board_get_cached``: the boards list and the
    board pages read their sizes and entries from Redis, so with the list memoized they keep
    answering while PostgreSQL is down (seasons/memo.py: stale on error)."""
    return _board_lists.get(season_id, lambda: tuple(board_list(season_id=season_id)))


def board_get(*, board_id: int) -> BoardRef:
    """The board by id, fresh from PostgreSQL (tasks and services; Board.DoesNotExist if gone)."""
    return BoardRef.from_model(Board.objects.select_related("season").get(pk=board_id))


def main_board_get(*, season_id: int) -> BoardRef:
    """The season's main board, fresh from PostgreSQL (Board.DoesNotExist if none)."""
    board = Board.objects.select_related("season").get(season_id=season_id, slug=MAIN_BOARD)
    return BoardRef.from_model(board)


def board_list(*, season_id: int) -> list[BoardRef]:
    """The season's boards, ``main`` first, then in creation order."""
    boards = Board.objects.select_related("season").filter(season_id=season_id).order_by("id")
    refs = [BoardRef.from_model(board) for board in boards]
    return sorted(refs, key=lambda ref: ref.slug != MAIN_BOARD)


def boards_of_seasons(*, season_ids: set[int]) -> dict[tuple[int, str], BoardRef]:
    """Every board of the given seasons by (season id, slug), fresh from PostgreSQL (ingestion
    validates each batch against it: statuses change, so no memo)."""
    boards = Board.objects.select_related("season").filter(season_id__in=season_ids)
    return {(board.season_id, board.slug): BoardRef.from_model(board) for board in boards}


def board_list_live() -> list[BoardRef]:
    """The boards of every season whose boards still move: active, or closing while the
    consumer drains its last results."""
    boards = (
        Board.objects.select_related("season")
        .filter(season__status__in=[SeasonStatus.ACTIVE, SeasonStatus.CLOSING])
        .order_by("season_id", "id")
    )
    return [BoardRef.from_model(board) for board in boards]


def board_list_open() -> list[BoardRef]:
    """The boards Redis must hold: those of every season not closed yet (a scheduled season's
    boards are read, empty, before its start; a closed season's keys are dropped)."""
    boards = (
        Board.objects.select_related("season")
        .exclude(season__status=SeasonStatus.CLOSED)
        .order_by("season_id", "id")
    )
    return [BoardRef.from_model(board) for board in boards]


def season_list_with_main_rule() -> QuerySet[Season]:
    """Every season (most recent start first), annotated with its main board's rule and its
    number of boards (the seasons list of the API)."""
    main_rule = Board.objects.filter(season_id=OuterRef("pk"), slug=MAIN_BOARD).values("rule")[:1]
    return Season.objects.annotate(rule=Subquery(main_rule), boards_count=Count("boards")).order_by(
        "-starts_at", "-id"
    )


@dataclass(frozen=True, slots=True)
class RankingEntry:
    rank: int
    player_id: int
    points: int


@dataclass(frozen=True, slots=True)
class PlayerStanding:
    entry: RankingEntry
    # Players on the board.
    total: int
    # Share of the board ranked at or below the player, in percent (rank 1 -> 100.0).
    percentile: float
    # Points the player must add to their score to pass the next player up; None at rank 1.
    points_to_next_rank: int | None


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


def ranked_entries(
    *, flat: list[bytes], start: int, first_rank: int, codec: ScoreCodec
) -> list[RankingEntry]:
    """Entries from a ``member, score, ...`` slice that begins at 0-based ``start``.

    An entry whose score differs from the previous one ranks at its position + 1 (every entry
    above it scores strictly higher); an equal score shares the previous entry's rank.
    """
    entries: list[RankingEntry] = []
    previous: bytes | None = None
    rank = first_rank
    for offset in range(0, len(flat), 2):
        member, score = flat[offset], flat[offset + 1]
        if previous is not None and score != previous:
            rank = start + offset // 2 + 1
        previous = score
        entries.append(
            RankingEntry(rank=rank, player_id=int(member), points=codec.decode_points(score))
        )
    return entries


class BoardUnavailableError(RuntimeError):
    """Redis does not hold the board as PostgreSQL has it (lost, or being recovered): answer
    "try again shortly", never an empty or partial board."""

    def __init__(self, board: BoardRef) -> None:
        super().__init__(
            f"board {board.slug!r} of season {board.season_id} is being recovered from the "
            "source of truth; try again in a few seconds"
        )
        self.board = board


def _guard_keys(board: BoardRef, *, on_master: bool = True) -> list[str]:
    """The keys the read scripts require: the board's intact key and, on the master, its
    checked key (never replicated: a replica read can vouch only for the intact one); none for
    a closed season's board (its keys are dropped at close-out, and an empty answer is then the
    truth: the final standings are elsewhere)."""
    if board.season.status == SeasonStatus.CLOSED:
        return []
    guards = [keys.board_intact(board_id=board.id)]
    if on_master:
        guards.append(keys.board_checked(board_id=board.id))
    return guards


def _board_read(board: BoardRef, script: str, *, key: str, args: Sequence[str | int]) -> Any:
    """Run the read script on ``key`` of ``board`` (a replica's when reads may use them),
    guarded by the board's intact key."""
    reply = read_script_call(
        get_board_read_redis(),
        script,
        keys=[key, *_guard_keys(board, on_master=not reads_from_replicas())],
        args=args,
    )
    # The scripts answer -1 (an integer; their other replies are lists or nil) when the
    # board's intact key is missing.
    if reply == -1:
        raise BoardUnavailableError(board)
    return reply


def board_page_get(
    *, board: BoardRef, board_key: str, start: int, count: int
) -> list[RankingEntry]:
    """``count`` entries of a board from 0-based position ``start`` (one atomic script)."""
    if count <= 0:
        return []
    first_rank, flat = _board_read(
        board, "board_page", key=board_key, args=[start, start + count - 1]
    )
    codec = board.codec
    return ranked_entries(flat=flat, start=start, first_rank=int(first_rank), codec=codec)


def board_ranks_get(*, board: BoardRef, start_rank: int, count: int) -> list[RankingEntry]:
    """A page of the board from the 1-based position ``start_rank``."""
    return board_page_get(
        board=board, board_key=keys.board(board_id=board.id), start=start_rank - 1, count=count
    )


def daily_board_top_get(*, board: BoardRef, day: date, limit: int) -> list[RankingEntry]:
    return board_page_get(
        board=board, board_key=keys.daily_board(board_id=board.id, day=day), start=0, count=limit
    )


def _player_script(*, board: BoardRef, player_id: int, radius: int) -> list[object] | None:
    result = _board_read(
        board, "board_player", key=keys.board(board_id=board.id), args=[str(player_id), radius]
    )
    return cast(list[object] | None, result)


def board_player_get(*, board: BoardRef, player_id: int) -> PlayerStanding | None:
    """The player's standing on the board, or None if they have no score."""
    result = _player_script(board=board, player_id=player_id, radius=-1)
    if result is None:
        return None
    rank, score, total, next_score = (
        int(cast(int, result[0])),
        cast(bytes, result[1]),
        int(cast(int, result[2])),
        cast(bytes | None, result[3]),
    )
    codec = board.codec
    points = codec.decode_points(score)
    to_next = None
    if next_score is not None:
        # How far the value must move to pass the next player up: up on a desc board, down on
        # an asc one.
        gap = codec.decode_points(next_score) - points
        to_next = (-gap if board.ascending else gap) + 1
    return PlayerStanding(
        entry=RankingEntry(rank=rank, player_id=player_id, points=points),
        total=total,
        percentile=round((total - rank + 1) * 100 / total, 2),
        points_to_next_rank=to_next,
    )


def board_around_get(*, board: BoardRef, player_id: int, radius: int) -> list[RankingEntry]:
    """Entries from the player's position - radius to + radius; [] if they have no score."""
    result = _player_script(board=board, player_id=player_id, radius=radius)
    if result is None:
        return []
    start, first_rank = int(cast(int, result[4])), int(cast(int, result[5]))
    window = cast(list[bytes], result[6])
    return ranked_entries(flat=window, start=start, first_rank=first_rank, codec=board.codec)


def board_friends_get(*, board: BoardRef, player_ids: list[int]) -> list[RankingEntry]:
    """The listed players' global entries, best first; players without a score left out."""
    if not player_ids:
        return []
    flat: list[bytes] = _board_read(
        board,
        "board_friends",
        key=keys.board(board_id=board.id),
        args=[str(pid) for pid in player_ids],
    )
    codec = board.codec
    entries = [
        RankingEntry(
            rank=int(flat[offset + 2]),
            player_id=int(flat[offset]),
            points=codec.decode_points(flat[offset + 1]),
        )
        for offset in range(0, len(flat), 3)
    ]
    # Within a shared rank, the board's own order (ZREVRANGE: member bytes descending), so
    # the friends list agrees with the top list and the pages.
    entries.sort(key=lambda entry: str(entry.player_id), reverse=True)
    entries.sort(key=lambda entry: entry.rank)
    return entries


# --- the top list --------------------------------------------------------------------------------


def board_top_read(*, board: BoardRef, count: int) -> TopRead:
    """The board's top ``count`` entries with the Redis clock at that read, in one script on the
    board's master: a snapshot is taken with it, and a live top list is read with it, so their
    versions come from one clock and order them as the board's states (docs/read-api.md)."""
    seconds, micros, intact, flat = get_script(get_board_redis(), "board_top")(
        keys=[keys.board(board_id=board.id), *_guard_keys(board)], args=[count]
    )
    return TopRead(
        version=int(seconds) * 1_000_000 + int(micros),
        intact=bool(int(intact)),
        entries=tuple(ranked_entries(flat=flat, start=0, first_rank=1, codec=board.codec)),
    )


def top_snapshot_decode(*, raw: bytes | str, board_id: int) -> TopSnapshot | None:
    """Parse a stored snapshot; None (and a warning) if it is unreadable or another board's."""
    try:
        body = json.loads(raw)
        snapshot = TopSnapshot(
            board_id=int(body["boardId"]),
            generated_at=float(body["generatedAt"]),
            entries=tuple(
                RankingEntry(rank=int(rank), player_id=int(player), points=int(points))
                for rank, player, points in body["entries"]
            ),
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
            return _TopState(state.version, state.snapshot, state.checked_at, state.served)

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

    def served(self, board_id: int, version: int) -> None:
        with self._lock:
            state = self._states.get(board_id)
            if state is None:
                state = self._states[board_id] = _TopState(
                    version=0, snapshot=None, checked_at=-math.inf, served=0
                )
            state.served = max(state.served, version)

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
        read = board_top_read(board=board, count=limit)
        if not read.intact:
            raise BoardUnavailableError(board)
        top = TopList(entries=read.entries, source="live", version=read.version)
    _top_states.served(board.id, top.version)
    return top


def weekly_board_top_get(
    *, board: BoardRef, iso_year: int, iso_week: int, limit: int
) -> list[RankingEntry]:
    return board_page_get(
        board=board,
        board_key=keys.weekly_board(board_id=board.id, iso_year=iso_year, iso_week=iso_week),
        start=0,
        count=limit,
    )


@dataclass(frozen=True)
class BoardOverview:
    board: BoardRef
    size: int
    top: list[RankingEntry]
    snapshot_refreshed_at: datetime | None


def board_overview_get(*, board: BoardRef, limit: int = 100) -> BoardOverview:
    """What staff see of a live board: its size, its top ``limit`` as the API ranks it, and when
    the top-list snapshot was last refreshed (read from Redis, not from this process's memo)."""
    client = get_board_redis()
    size = int(client.zcard(keys.board(board_id=board.id)))
    try:
        top = board_ranks_get(board=board, start_rank=1, count=limit)
    except BoardUnavailableError:
        # Staff see the board's size (0 or partial) and an empty top while it is recovered.
        top = []
    raw = client.get(keys.top_snapshot(board_id=board.id))
    snapshot = None if raw is None else top_snapshot_decode(raw=raw, board_id=board.id)
    refreshed = None if snapshot is None else datetime.fromtimestamp(snapshot.generated_at, UTC)
    return BoardOverview(board=board, size=size, top=top, snapshot_refreshed_at=refreshed)


def board_sizes_get(*, boards: Sequence[BoardRef]) -> dict[int, int]:
    """Each board's number of players in Redis (one pipelined ZCARD per board)."""
    pipe = get_board_redis().pipeline(transaction=False)
    for board in boards:
        pipe.zcard(keys.board(board_id=board.id))
    return {board.id: int(size) for board, size in zip(boards, pipe.execute(), strict=True)}


def board_sizes_known_get(*, boards: Sequence[BoardRef]) -> dict[int, int | None]:
    """Each board's number of players, or None while Redis does not hold the board as truth
    (its intact key missing, or a recovery rebuilding it): the boards list never passes a lost
    board's 0 or partial count for its size. One ``board_size.lua`` per board, pipelined."""
    if not boards:
        return {}
    client = get_board_redis()
    script = get_script(client, "board_size")
    calls = [
        ScriptCall(
            script=script,
            keys=[
                keys.board(board_id=board.id),
                keys.board_recovering(board_id=board.id),
                *_guard_keys(board),
            ],
            args=[],
        )
        for board in boards
    ]
    replies = scripts_pipelined(client, calls)
    return {
        board.id: None if int(size) == -1 else int(size)
        for board, size in zip(boards, replies, strict=True)
    }


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


def board_runs_latest(
    *, season_id: int, limit: int = 5
) -> tuple[list[RebuildRun], list[ReconcileRun]]:
    """The season's latest rebuild runs and reconcile runs, newest first, with their boards."""
    rebuilds = RebuildRun.objects.select_related("board").filter(season_id=season_id)
    reconciles = ReconcileRun.objects.select_related("board").filter(season_id=season_id)
    return (
        list(rebuilds.order_by("-started_at")[:limit]),
        list(reconciles.order_by("-checked_at")[:limit]),
    )


# --- the public board page (leaderboard/views.py) --------------------------------------------
# One read per period of the page; each reads the period's list, then the player it looks up.


@dataclass(frozen=True, slots=True)
class PlayerLookup:
    """A player looked up on a board: their standing and the entries around them, or neither
    when they have no score there."""

    player_id: int
    standing: PlayerStanding | None
    around: list[RankingEntry]


@dataclass(frozen=True, slots=True)
class BoardPage:
    entries: Sequence[RankingEntry]
    # The season's top list as read (its version and source give the ETag live.js starts from);
    # None for a deep page, a day or a week.
    top: TopList | None
    # None when no player was asked for.
    lookup: PlayerLookup | None


def _page_lookup(*, board: BoardRef, player_id: int | None, radius: int) -> PlayerLookup | None:
    if player_id is None:
        return None
    standing = board_player_get(board=board, player_id=player_id)
    around = (
        []
        if standing is None
        else board_around_get(board=board, player_id=player_id, radius=radius)
    )
    return PlayerLookup(player_id=player_id, standing=standing, around=around)


def board_season_page_get(
    *, board: BoardRef, start_rank: int, count: int, player_id: int | None, radius: int
) -> BoardPage:
    """The season-long list: the top ``count`` (from the snapshot) from rank 1, else a page of
    ``count`` from the 1-based position ``start_rank``; and the player looked up."""
    if start_rank > 1:
        entries: Sequence[RankingEntry] = board_ranks_get(
            board=board, start_rank=start_rank, count=count
        )
        top = None
    else:
        top = board_top_get(board=board, limit=count)
        entries = top.entries
    lookup = _page_lookup(board=board, player_id=player_id, radius=radius)
    return BoardPage(entries=entries, top=top, lookup=lookup)


def board_daily_page_get(
    *, board: BoardRef, day: date, count: int, player_id: int | None, radius: int
) -> BoardPage:
    """A UTC day's top ``count``, and the player looked up (on the season-long board)."""
    entries = daily_board_top_get(board=board, day=day, limit=count)
    lookup = _page_lookup(board=board, player_id=player_id, radius=radius)
    return BoardPage(entries=entries, top=None, lookup=lookup)


def board_weekly_page_get(
    *,
    board: BoardRef,
    iso_year: int,
    iso_week: int,
    count: int,
    player_id: int | None,
    radius: int,
) -> BoardPage:
    """An ISO week's top ``count`` (a board built beforehand, see weekly_board_ensure), and the
    player looked up (on the season-long board)."""
    entries = weekly_board_top_get(board=board, iso_year=iso_year, iso_week=iso_week, limit=count)
    lookup = _page_lookup(board=board, player_id=player_id, radius=radius)
    return BoardPage(entries=entries, top=None, lookup=lookup)
