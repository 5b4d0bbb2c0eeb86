"""A board's cohorts (contract 0.3): who is in which (PostgreSQL, services/cohorts.py) and their
ranks within it, read from the board's sorted set: the members' scores and global ranks in one
script (the friends read), so a cohort read costs O(members x log(board)) whatever the board's
size, and answers exactly what the board answers (rules, orders, ties, tie-break columns).

Who is in a cohort changes only while it fills, and a player's cohort never: a full cohort's
members and every player's cohort are memoized per process for good, an open cohort's members
for OPEN_COHORT_SECONDS.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from cachetools import LRUCache, TTLCache
from django.db import connection
from django.db.models import Count, Sum

from seasons.memo import process_state_register

from ..models import Cohort, CohortMember
from .boards import BoardRef
from .leagues import cohort_movements_projected
from .rankings import NOT_KEPT, RankingEntry, board_friends_get

# How long a cohort that still takes players is served as last read.
OPEN_COHORT_SECONDS = 1.0

_COHORTS = Cohort._meta.db_table
_MEMBERS = CohortMember._meta.db_table

# A player's cohort with its tier and members: a cold read of the player's cohort asks once.
_COHORT_OF_SQL = f"""
    SELECT c.number, c.tier, ARRAY(SELECT o.player_id FROM {_MEMBERS} o WHERE o.cohort_id = c.id)
    FROM {_MEMBERS} m JOIN {_COHORTS} c ON c.id = m.cohort_id
    WHERE m.board_id = %s AND m.player_id = %s
"""  # noqa: S608 -- table names come from the models
_MEMBERS_SQL = f"""
    SELECT c.tier, ARRAY(SELECT m.player_id FROM {_MEMBERS} m WHERE m.cohort_id = c.id)
    FROM {_COHORTS} c WHERE c.board_id = %s AND c.number = %s
"""  # noqa: S608


@dataclass(frozen=True, slots=True)
class CohortEntry:
    """A member's entry: ``rank`` within the cohort (competition ranks: an identical key shares
    one), the board's own entry beside (its rank is the global rank)."""

    rank: int
    entry: RankingEntry
    # On a league board, how the member would leave the tier if the season ended now.
    movement: str | None = None

    @property
    def global_rank(self) -> int:
        return self.entry.rank


@dataclass(frozen=True, slots=True)
class CohortStanding:
    number: int
    size: int  # the board's cohort size: how many the cohort takes
    members: int  # players in it (those without a score now are not among the entries)
    tier: str | None  # its league tier's name on a league board; None elsewhere
    entries: list[CohortEntry]


@dataclass(frozen=True, slots=True)
class _Members:
    tier: int | None
    players: tuple[int, ...]


_lock = threading.Lock()
_cohort_of: LRUCache[tuple[int, int], int] = LRUCache(maxsize=100_000)
# Bounded by the player ids held, not by cohorts: 10,000 cohorts of 1,000 (a client walking a
# board's cohorts) held about 400 MB per web worker. A million ids: about 40 MB.
_MEMBER_IDS_HELD = 1_000_000


def _ids_held(members: _Members) -> int:
    return max(1, len(members.players))


_full: LRUCache[tuple[int, int], _Members] = LRUCache(maxsize=_MEMBER_IDS_HELD, getsizeof=_ids_held)
_open: TTLCache[tuple[int, int], _Members] = TTLCache(
    maxsize=_MEMBER_IDS_HELD, ttl=OPEN_COHORT_SECONDS, getsizeof=_ids_held
)


class _Memos:
    def clear(self) -> None:
        with _lock:
            _cohort_of.clear()
            _full.clear()
            _open.clear()


process_state_register(_Memos())


def player_cohort_number(*, board: BoardRef, player_id: int) -> int | None:
    """The player's cohort on the board; None if they have none (no counted result yet, or a
    board without cohorts)."""
    key = (board.id, player_id)
    with _lock:
        number = _cohort_of.get(key)
    if number is not None:
        return number
    with connection.cursor() as cursor:
        cursor.execute(_COHORT_OF_SQL, [board.id, player_id])
        row = cursor.fetchone()
    if row is None:
        return None  # not memoized: the player may join at their next result
    number = int(row[0])
    with _lock:
        _cohort_of[key] = number
    # The members came with it: the cohort read that follows finds them memoized.
    _members_memoize(board, number, _Members(row[1], tuple(row[2])))
    return number


def _members(board: BoardRef, number: int) -> _Members | None:
    key = (board.id, number)
    with _lock:
        found = _full.get(key) or _open.get(key)
    if found is not None:
        return found
    with connection.cursor() as cursor:
        cursor.execute(_MEMBERS_SQL, [board.id, number])
        row = cursor.fetchone()
    if row is None:
        return None
    members = _Members(row[0], tuple(row[1]))
    _members_memoize(board, number, members)
    return members


def _members_memoize(board: BoardRef, number: int, members: _Members) -> None:
    with _lock:
        if board.cohort_size is not None and len(members.players) >= board.cohort_size:
            _full[(board.id, number)] = members
        else:
            _open[(board.id, number)] = members


def cohort_ranks(entries: Sequence[RankingEntry]) -> list[int]:
    """Global entries, best first, as ranks within their cohort: equal global ranks (identical
    keys) share a rank; the next distinct one ranks at its position."""
    ranks: list[int] = []
    rank = 0
    previous: int | None = None
    for position, entry in enumerate(entries, start=1):
        if entry.rank != previous:
            rank, previous = position, entry.rank
        ranks.append(rank)
    return ranks


def cohort_standing_get(
    *, board: BoardRef, number: int, limit: int | None = None
) -> CohortStanding | None:
    """Cohort ``number`` of the board, ranked (its first ``limit`` entries); None if the board
    has no such cohort."""
    if board.cohort_size is None:
        return None
    members = _members(board, number)
    if members is None:
        return None
    tier = board.tier_name(members.tier)
    # Every member of a league board's cohort plays in the cohort's tier: known without a
    # lookup per entry.
    entries = board_friends_get(
        board=board,
        player_ids=list(members.players),
        tier=tier if board.tiers else NOT_KEPT,
    )
    ranks = cohort_ranks(entries)
    movements = cohort_movements_projected(board=board, tier=members.tier, ranks=ranks)
    if limit is not None:
        entries, ranks, movements = entries[:limit], ranks[:limit], movements[:limit]
    return CohortStanding(
        number=number,
        size=board.cohort_size,
        members=len(members.players),
        tier=tier,
        entries=[
            CohortEntry(rank, entry, movement)
            for rank, entry, movement in zip(ranks, entries, movements, strict=True)
        ],
    )


def player_cohort_get(*, board: BoardRef, player_id: int) -> CohortStanding | None:
    """The player's cohort, ranked; None if they have none on the board."""
    if board.cohort_size is None:
        return None
    number = player_cohort_number(board=board, player_id=player_id)
    if number is None:
        return None
    return cohort_standing_get(board=board, number=number)


@dataclass(frozen=True, slots=True)
class CohortsSummary:
    cohorts: int
    players: int
    # The newest cohort's fill (members, of the board's size); None before the first.
    last_members: int | None


def board_cohorts_summary(*, board_id: int) -> CohortsSummary:
    """How many cohorts the board has and how full (the admin)."""
    cohorts = Cohort.objects.filter(board_id=board_id)
    totals = cohorts.aggregate(count=Count("id"), players=Sum("members", default=0))
    newest = cohorts.order_by("-number").values_list("members", flat=True).first()
    return CohortsSummary(totals["count"], totals["players"], newest)


def board_cohorts_last(*, board_id: int) -> int:
    """The number of the board's newest cohort (0: none yet)."""
    found = Cohort.objects.filter(board_id=board_id).order_by("-number").first()
    return found.number if found is not None else 0
