"""A board's ranks in Redis: pages, a player's standing, around a player, friends, and the daily and
weekly boards.

Ranks are 1-based competition ranks on the composite score: players whose encoded scores are
identical (same points reached in the same tick) share a rank, and Redis's member-lexical
order among them never decides one. A board with tie-break columns ranks by its wide keys the
same way, through the ``wide_`` twin of each script (docs/tie-break-columns.md). Every read
that needs more than one command is one Lua script, so its ranks come from a single board
state.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any, Final, cast

from redis.cluster import RedisCluster

from .. import keys
from ..player_names import UNKNOWN, PlayerName, player_names_get, player_names_read
from ..redis import get_board_read_redis, get_board_redis, redis_unavailable
from ..scripts import ScriptCall, calls_pipelined, get_script, read_script_call
from ._guards import guard_keys, master_guard_keys
from .boards import BoardRef
from .leagues import entries_with_tiers
from .metadata import entries_with_metadata
from .tournaments import entries_with_attempts

logger = logging.getLogger(__name__)


class _NotKept:
    """The metadata of an entry of a board that keeps none, or the tier of an entry of a board
    that is no league board (the field is left out)."""

    def __repr__(self) -> str:
        return "NOT_KEPT"


NOT_KEPT: Final = _NotKept()


@dataclass(frozen=True, slots=True)
class RankingEntry:
    rank: int
    player_id: int
    points: int
    # The player's visible name and ISO country from the name cache (leaderboard/
    # player_names.py); None when unknown, hidden by staff, or the cache could not be read.
    display_name: str | None = None
    country: str | None = None
    # On a board that keeps metadata, the deciding result's (selectors/metadata.py), None
    # when it had none; NOT_KEPT elsewhere.
    metadata: Any = NOT_KEPT
    # On a board with tie-break columns, the player's value of each column (name -> value, in
    # the board's column order); None elsewhere.
    tiebreakers: dict[str, int] | None = None
    # On a league board, the name of the player's league tier (None while they are in no
    # cohort yet: selectors/leagues.py); NOT_KEPT elsewhere.
    tier: Any = NOT_KEPT
    # On a board with max-attempts, the player's attempts (distinct matches stored:
    # selectors/tournaments.py); None elsewhere.
    attempts: int | None = None
    # The encoded score as Redis answered it (a board with tie-break columns: the wide key),
    # where the entry was read from Redis: the metadata's memo key (one score is one deciding
    # result). Not part of the entry's value.
    score: bytes | None = field(default=None, compare=False, repr=False)

    def named(self, display_name: str | None, country: str | None) -> RankingEntry:
        """The entry with the player's name: what ``dataclasses.replace`` gives, built by the
        constructor directly (``replace`` walks the fields by name, and on a cohort's or a
        page's entries that walk was a visible share of the read)."""
        return RankingEntry(
            self.rank,
            self.player_id,
            self.points,
            display_name,
            country,
            self.metadata,
            self.tiebreakers,
            self.tier,
            self.attempts,
            self.score,
        )


def _names_unavailable(exc: Exception) -> None:
    """Names are an adornment of an answer the board already gave: when the name cache cannot
    be read (its Redis node down while the board's answered, a cluster slot moving) the
    entries go out with null names rather than turn a good read into a 503. A cache that lost
    its keys (before its rebuild) reads as unknown names the same way, by itself."""
    if not redis_unavailable(exc):
        raise exc
    logger.warning("name cache unreadable, entries served without names: %s", exc)


def entries_named(entries: Sequence[RankingEntry]) -> list[RankingEntry]:
    """``entries`` with their players' names, read in one round trip (player_names_get); as
    they are when the name cache cannot be read (``_names_unavailable``)."""
    if not entries:
        return []
    try:
        names = player_names_get(player_ids=[entry.player_id for entry in entries])
    except Exception as exc:
        _names_unavailable(exc)
        return list(entries)
    named: list[RankingEntry] = []
    for entry in entries:
        name = names[entry.player_id]
        named.append(entry.named(name.display_name, name.country))
    return named


def entries_adorned(
    *,
    board: BoardRef,
    entries: Sequence[RankingEntry],
    since: datetime | None = None,
    until: datetime | None = None,
    with_tiers: bool = True,
    with_names: bool = True,
) -> list[RankingEntry]:
    """``entries`` with their names (unless ``with_names`` is False: the caller read them with
    the board), on a board that keeps metadata their metadata (for the
    results from ``since`` to before ``until``: a daily or weekly board), on a league board
    their tiers (unless ``with_tiers`` is False: the caller set them), and on a board with
    max-attempts their attempts."""
    adorned = entries_with_metadata(
        board=board,
        entries=entries_named(entries) if with_names else entries,
        since=since,
        until=until,
    )
    adorned = entries_with_attempts(board=board, entries=adorned)
    return entries_with_tiers(board=board, entries=adorned) if with_tiers else adorned


def day_bounds(day: date) -> tuple[datetime, datetime]:
    """The UTC day's results, as a daily board holds them: [midnight, next midnight)."""
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    return start, start + timedelta(days=1)


def week_bounds(*, iso_year: int, iso_week: int) -> tuple[datetime, datetime]:
    """The ISO week's results, as a weekly board holds them: its seven UTC days."""
    start, _ = day_bounds(date.fromisocalendar(iso_year, iso_week, 1))
    return start, start + timedelta(days=7)


@dataclass(frozen=True, slots=True)
class PlayerStanding:
    entry: RankingEntry
    # Players on the board.
    total: int
    # Share of the board ranked at or below the player, in percent (rank 1 -> 100.0).
    percentile: float
    # Points the player must add to their score to pass the next player up; None at rank 1.
    points_to_next_rank: int | None


def ranked_entries(
    *, flat: list[bytes], start: int, first_rank: int, board: BoardRef
) -> list[RankingEntry]:
    """Entries from a ``member, score, ...`` slice that begins at 0-based ``start`` (on a board
    with tie-break columns, a ``member, ...`` slice of its wide members).

    An entry whose score differs from the previous one ranks at its position + 1 (every entry
    above it scores strictly higher); an equal score shares the previous entry's rank.
    """
    if board.tiebreaks:
        return _wide_ranked_entries(members=flat, start=start, first_rank=first_rank, board=board)
    codec = board.codec
    entries: list[RankingEntry] = []
    previous: bytes | None = None
    rank = first_rank
    for offset in range(0, len(flat), 2):
        member, score = flat[offset], flat[offset + 1]
        if previous is not None and score != previous:
            rank = start + offset // 2 + 1
        previous = score
        entries.append(
            RankingEntry(
                rank=rank, player_id=int(member), points=codec.decode_points(score), score=score
            )
        )
    return entries


def wide_entry(*, board: BoardRef, rank: int, player_id: int, key: bytes) -> RankingEntry:
    """The entry of a player holding wide ``key`` on a board with tie-break columns."""
    wide = board.wide_codec
    assert wide is not None
    decoded = wide.decode(key)
    return RankingEntry(
        rank=rank,
        player_id=player_id,
        points=decoded.points,
        tiebreakers=dict(zip(board.tiebreak_names, decoded.tiebreakers, strict=True)),
        score=key,
    )


def _wide_ranked_entries(
    *, members: list[bytes], start: int, first_rank: int, board: BoardRef
) -> list[RankingEntry]:
    wide = board.wide_codec
    assert wide is not None
    length = wide.key_length
    entries: list[RankingEntry] = []
    previous: bytes | None = None
    rank = first_rank
    for position, member in enumerate(members):
        key, player = member[:length], int(member[length:])
        if previous is not None and key != previous:
            rank = start + position + 1
        previous = key
        entries.append(wide_entry(board=board, rank=rank, player_id=player, key=key))
    return entries


def _wide_keys(board: BoardRef, key: str) -> list[str]:
    """The keys a wide read script takes before the guards: the set and its index."""
    return [key, keys.board_index(board_key=key)] if board.tiebreaks else [key]


class BoardUnavailableError(RuntimeError):
    """Redis does not hold the board as PostgreSQL has it (lost, or being recovered): answer
    "try again shortly", never an empty or partial board."""

    def __init__(self, board: BoardRef) -> None:
        super().__init__(
            f"board {board.slug!r} of season {board.season_id} is being recovered from the "
            "source of truth; try again in a few seconds"
        )
        self.board = board


def _board_read(
    board: BoardRef, script: str, *, key: str, args: Sequence[str | int], primary: bool = False
) -> Any:
    """Run the read script on ``key`` of ``board`` (a replica's when reads may use them, unless
    ``primary``), guarded by the board's intact key; on a board with tie-break columns its
    ``wide_`` twin, which also takes the set's index."""
    reply = read_script_call(
        get_board_redis() if primary else get_board_read_redis(),
        f"wide_{script}" if board.tiebreaks else script,
        keys=[*_wide_keys(board, key), *guard_keys(board, on_master=False)],
        args=args,
        master_keys=master_guard_keys(board),
    )
    # The scripts answer -1 (an integer; their other replies are lists or nil) when the
    # board's intact key is missing.
    if reply == -1:
        raise BoardUnavailableError(board)
    return reply


def _unknown_name(player_id: int) -> PlayerName:
    return UNKNOWN


def _rank_of(entry: RankingEntry) -> int:
    return entry.rank


def _board_read_named(
    board: BoardRef,
    script: str,
    *,
    key: str,
    args: Sequence[str | int],
    player_ids: Sequence[int],
) -> tuple[Any, dict[int, PlayerName] | None]:
    """``_board_read``, and the names of ``player_ids`` (None when the name cache cannot be
    read: ``_names_unavailable``): for a read whose players are known before the board
    answers (a cohort, a friends list), the names go in the same pipeline as the board's
    script on a single Redis, one round trip for both. On a cluster the names' buckets live in
    other slots, on other nodes, and are read after the board as for every other read."""
    client = get_board_read_redis()
    names_read = player_names_read(player_ids=player_ids, client=client)
    if isinstance(client, RedisCluster):
        reply = _board_read(board, script, key=key, args=args)
        try:
            names_replies = calls_pipelined(client, names_read.calls)
        except Exception as exc:
            _names_unavailable(exc)
            return reply, None
    else:
        board_call = ScriptCall(
            script=get_script(client, f"wide_{script}" if board.tiebreaks else script),
            keys=[*_wide_keys(board, key), *guard_keys(board)],
            args=args,
        )
        reply, *names_replies = calls_pipelined(client, [board_call, *names_read.calls])
        if isinstance(reply, Exception):
            raise reply
        if reply == -1:
            raise BoardUnavailableError(board)
    for names_reply in names_replies:
        if isinstance(names_reply, Exception):
            _names_unavailable(names_reply)
            return reply, None
    return reply, names_read.names(names_replies)


def board_page_get(
    *,
    board: BoardRef,
    board_key: str,
    start: int,
    count: int,
    period: tuple[datetime, datetime] | None = None,
    primary: bool = False,
) -> list[RankingEntry]:
    """``count`` entries of a board from 0-based position ``start`` (one atomic script);
    ``period`` bounds a daily or weekly board's results (for their metadata). ``primary``
    reads the master even when reads may use replicas: a key this request just wrote may not
    have reached them."""
    if count <= 0:
        return []
    wide = board.wide_codec
    first_rank, flat = _board_read(
        board,
        "board_page",
        key=board_key,
        args=[start, start + count - 1, *([wide.key_length] if wide else [])],
        primary=primary,
    )
    since, until = period or (None, None)
    return entries_adorned(
        board=board,
        entries=ranked_entries(flat=flat, start=start, first_rank=int(first_rank), board=board),
        since=since,
        until=until,
    )


def board_ranks_get(*, board: BoardRef, start_rank: int, count: int) -> list[RankingEntry]:
    """A page of the board from the 1-based position ``start_rank``."""
    return board_page_get(
        board=board, board_key=keys.board(board_id=board.id), start=start_rank - 1, count=count
    )


def daily_board_top_get(*, board: BoardRef, day: date, limit: int) -> list[RankingEntry]:
    return board_page_get(
        board=board,
        board_key=keys.daily_board(board_id=board.id, day=day),
        start=0,
        count=limit,
        period=day_bounds(day),
    )


def weekly_board_top_get(
    *, board: BoardRef, iso_year: int, iso_week: int, limit: int, primary: bool = False
) -> list[RankingEntry]:
    """An ISO week's top ``limit``; ``primary`` right after this request built the week
    (weekly_board_ensure), which a replica may not hold yet and would read as empty."""
    return board_page_get(
        board=board,
        board_key=keys.weekly_board(board_id=board.id, iso_year=iso_year, iso_week=iso_week),
        start=0,
        count=limit,
        period=week_bounds(iso_year=iso_year, iso_week=iso_week),
        primary=primary,
    )


def _player_script(*, board: BoardRef, player_id: int, radius: int) -> list[object] | None:
    result = _board_read(
        board, "board_player", key=keys.board(board_id=board.id), args=[str(player_id), radius]
    )
    return cast(list[object] | None, result)


def board_player_get(
    *, board: BoardRef, player_id: int, named: bool = True
) -> PlayerStanding | None:
    """The player's standing on the board, or None if they have no score; ``named=False``
    skips the name read (the card, which reads the profile itself, once for all boards)."""
    result = _player_script(board=board, player_id=player_id, radius=-1)
    if result is None:
        return None
    rank, score, total, next_score = (
        int(cast(int, result[0])),
        cast(bytes, result[1]),
        int(cast(int, result[2])),
        cast(bytes | None, result[3]),
    )
    if board.tiebreaks:
        entry = wide_entry(board=board, rank=rank, player_id=player_id, key=score)
        next_points = (
            None
            if next_score is None
            else wide_entry(board=board, rank=0, player_id=0, key=next_score).points
        )
    else:
        codec = board.codec
        entry = RankingEntry(
            rank=rank, player_id=player_id, points=codec.decode_points(score), score=score
        )
        next_points = None if next_score is None else codec.decode_points(next_score)
    to_next = None
    if next_points is not None:
        # How far the value must move to pass the next player up: up on a desc board, down on
        # an asc one. (With tie-break columns: one point past the next player's points beats
        # them whatever the columns; equal points and worse columns need that one point too.)
        gap = next_points - entry.points
        to_next = (-gap if board.ascending else gap) + 1
    return PlayerStanding(
        entry=entries_adorned(board=board, entries=[entry])[0] if named else entry,
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
    return entries_adorned(
        board=board,
        entries=ranked_entries(flat=window, start=start, first_rank=first_rank, board=board),
    )


def board_friends_get(
    *, board: BoardRef, player_ids: list[int], tier: Any = NOT_KEPT
) -> list[RankingEntry]:
    """The listed players' global entries, best first; players without a score left out.
    ``tier``: the tier name every one of them plays in on this league board (a cohort's
    members), so it is not looked up per player."""
    if not player_ids:
        return []
    flat, names = _board_read_named(
        board,
        "board_friends",
        key=keys.board(board_id=board.id),
        args=[str(pid) for pid in player_ids],
        player_ids=player_ids,
    )
    named = names.__getitem__ if names is not None else _unknown_name
    entries: list[RankingEntry] = []
    if board.tiebreaks:
        for offset in range(0, len(flat), 3):
            player_id = int(flat[offset])
            entry = wide_entry(
                board=board, rank=int(flat[offset + 2]), player_id=player_id, key=flat[offset + 1]
            )
            name = named(player_id)
            entries.append(
                replace(entry, display_name=name.display_name, country=name.country, tier=tier)
            )
    else:
        players = [int(member) for member in flat[0::3]]
        scores = flat[1::3]
        ranks = [int(rank) for rank in flat[2::3]]
        points = board.codec.decode_points_many(scores)
        for player_id, rank, score, value in zip(players, ranks, scores, points, strict=True):
            name = named(player_id)
            entries.append(
                RankingEntry(
                    rank,
                    player_id,
                    value,
                    name.display_name,
                    name.country,
                    tier=tier,
                    score=score,
                )
            )
    # Within a shared rank, the board's own order, so the friends list agrees with the top
    # list and the pages: ZREVRANGE orders member bytes descending; a board with tie-break
    # columns (ZRANGE of key .. player) the player ids as text, ascending. Shared ranks are
    # rare: the second sort runs only when one occurs.
    entries.sort(key=_rank_of)
    if len({entry.rank for entry in entries}) < len(entries):
        entries.sort(key=lambda entry: str(entry.player_id), reverse=not board.tiebreaks)
        entries.sort(key=_rank_of)
    return entries_adorned(
        board=board, entries=entries, with_tiers=tier is NOT_KEPT, with_names=False
    )
