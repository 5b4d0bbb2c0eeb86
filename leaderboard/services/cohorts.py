"""Cohorts (contract 0.3): each player of a board with cohorts joins, at their first counted
result, the open cohort of their tier, or a new one once it is full; never another after that.

PostgreSQL decides, in the transaction that stores the result (``match_results_store``): the
assignment is then recorded by the same commit that makes the result count, so no crash can
leave a counted player without a cohort or a cohort the truth does not know, and replays,
rebuilds, reconciles and recovery (which only ever rewrite scores) keep every player where they
are. A per-board advisory lock, taken only by a batch that brings players new to the board,
serializes the assigners (concurrent consumers, a Redis Cluster: the board's row of truth is one
place whatever the topology). A cohort's ranks are read from the board's own sorted set
(``selectors/cohorts.py``), so nothing about cohorts lives in Redis and none of the board's
Redis machinery had to learn about them. docs/cohorts.md says why.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import NamedTuple

from django.db.backends.utils import CursorWrapper

from seasons.memo import process_state_register

from ..models import Board, Cohort, CohortMember
from ..selectors._sql import array_literal

_BOARDS = Board._meta.db_table
_COHORTS = Cohort._meta.db_table
_MEMBERS = CohortMember._meta.db_table

# pg_advisory_xact_lock(key1, key2): key1 names what is locked (cohort assignment of a board);
# key2 is the board id.
COHORT_LOCK_CLASS = 0x636F68  # "coh"

_OPEN_SQL = f"""
    SELECT DISTINCT ON (tier) id, number, tier, members FROM {_COHORTS}
    WHERE board_id = %s ORDER BY tier, number DESC
"""  # noqa: S608 -- table names come from the models
_LAST_NUMBER_SQL = f"SELECT coalesce(max(number), 0) FROM {_COHORTS} WHERE board_id = %s"  # noqa: S608
# Every cohort a batch opens, in one statement, each with the members it takes now.
_NEW_COHORTS_SQL = f"""
    INSERT INTO {_COHORTS} (board_id, number, tier, members, opened_at)
    SELECT %s, n, t, m, now()
    FROM unnest(%s::text::int[], %s::text::int[], %s::text::int[]) AS f(n, t, m)
    RETURNING number, id
"""  # noqa: S608
_BOARD_FILL_SQL = f"UPDATE {_BOARDS} SET cohort_members = cohort_members + %s WHERE id = %s"  # noqa: S608
_FILL_SQL = f"""
    UPDATE {_COHORTS} c SET members = c.members + f.added
    FROM unnest(%s::text::bigint[], %s::text::int[]) AS f(id, added) WHERE c.id = f.id
"""  # noqa: S608
# In player order: the unique (board, player) index then grows in runs rather than at random.
_MEMBERS_SQL = f"""
    INSERT INTO {_MEMBERS} (board_id, cohort_id, player_id, joined_at)
    SELECT %s, c, p, now() FROM unnest(%s::text::bigint[], %s::text::bigint[]) AS m(c, p)
    ORDER BY p
"""  # noqa: S608


class _KnownMembers:
    """(board, player) pairs this process saw committed into a cohort: a player's cohort never
    changes and a board's id is never reused, so a batch need not ask PostgreSQL again whether
    they have one. Only a hint to skip the look-up: filled after the commit that made (or found)
    the membership, never before; bounded, and emptied whole when full (a player then forgotten
    is looked up once more)."""

    MAX_PAIRS = 300_000

    def __init__(self) -> None:
        self._pairs: set[tuple[int, int]] = set()
        self._lock = threading.Lock()

    def unknown(self, pairs: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
        known = self._pairs
        return [pair for pair in pairs if pair not in known]

    def add(self, pairs: Collection[tuple[int, int]]) -> None:
        with self._lock:
            if len(self._pairs) + len(pairs) > self.MAX_PAIRS:
                self._pairs = set()
            self._pairs.update(pairs)

    def clear(self) -> None:
        with self._lock:
            self._pairs = set()


KNOWN_MEMBERS = _KnownMembers()
process_state_register(KNOWN_MEMBERS)


class CohortCandidate(NamedTuple):
    """A player of the batch with no cohort yet on a board with cohorts, in assignment order
    (their first result first). A named tuple, not a dataclass: a batch of new players makes
    thousands, and a frozen dataclass's construction was a visible share of the consumer's time
    per new player."""

    board_id: int
    player_id: int
    # The league tier the player plays in on this board; None on a board without tiers.
    tier: int | None = None


def cohorts_lock(*, cursor: CursorWrapper, board_ids: Sequence[int]) -> None:
    """Take the boards' assignment locks, held to the commit; in board order, so two batches
    never wait on each other in a circle."""
    for board_id in sorted(set(board_ids)):
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [COHORT_LOCK_CLASS, board_id])


def cohort_members_assign(
    *,
    cursor: CursorWrapper,
    candidates: Sequence[CohortCandidate],
    sizes: Mapping[int, int],
) -> int:
    """Put each candidate into the open cohort of their tier on their board (``sizes``: each
    board's cohort size), opening cohorts as they fill, numbered in the order the candidates
    that open them come. The caller holds the boards' locks (``cohorts_lock``) and found the
    candidates after taking them; a player listed twice joins once. Returns how many players
    joined a cohort."""
    by_board: dict[int, dict[int, int | None]] = {}  # board -> player -> tier, in order
    for board_id, player_id, tier in candidates:
        by_board.setdefault(board_id, {}).setdefault(player_id, tier)
    joined = 0
    for board_id, players in sorted(by_board.items()):
        joined += _board_assign(cursor, board_id, players, sizes[board_id])
    return joined


def _board_assign(
    cursor: CursorWrapper, board_id: int, players: dict[int, int | None], size: int
) -> int:
    """One board's candidates (player -> tier, in order): per tier, the room left in its open
    cohort first, then new cohorts of ``size`` (sliced, not placed one by one)."""
    cursor.execute(_OPEN_SQL, [board_id])
    # tier -> (cohort id, members): the newest cohort of each tier, open while not full.
    open_of = {
        tier: (cohort_id, members)
        for cohort_id, _number, tier, members in cursor.fetchall()
        if members < size
    }
    cursor.execute(_LAST_NUMBER_SQL, [board_id])
    row = cursor.fetchone()
    last_number = int(row[0]) if row else 0
    by_tier: dict[int | None, list[tuple[int, int]]] = {}  # tier -> [(position, player)]
    for position, (player_id, tier) in enumerate(players.items()):
        by_tier.setdefault(tier, []).append((position, player_id))
    filled: list[tuple[int, list[int]]] = []  # (existing cohort id, players joining it)
    # (position of the player who opens it, tier, players): numbered below in that order.
    opened: list[tuple[int, int | None, list[int]]] = []
    for tier, queue in by_tier.items():
        start = 0
        found = open_of.get(tier)
        if found is not None:
            start = min(size - found[1], len(queue))
            filled.append((found[0], [player for _, player in queue[:start]]))
        for first in range(start, len(queue), size):
            chunk = queue[first : first + size]
            opened.append((chunk[0][0], tier, [player for _, player in chunk]))
    opened.sort(key=lambda cohort: cohort[0])
    cohort_ids: list[int] = []
    member_ids: list[int] = []
    for cohort_id, joining in filled:
        cohort_ids += [cohort_id] * len(joining)
        member_ids += joining
    if filled:
        cursor.execute(
            _FILL_SQL,
            [
                array_literal([cohort_id for cohort_id, _ in filled]),
                array_literal([len(joining) for _, joining in filled]),
            ],
        )
    if opened:
        numbers = list(range(last_number + 1, last_number + 1 + len(opened)))
        cursor.execute(
            _NEW_COHORTS_SQL,
            [
                board_id,
                array_literal(numbers),
                array_literal([tier for _, tier, _ in opened]),
                array_literal([len(joining) for _, _, joining in opened]),
            ],
        )
        new_ids = {int(number): int(cohort_id) for number, cohort_id in cursor.fetchall()}
        for number, (_, _, joining) in zip(numbers, opened, strict=True):
            cohort_ids += [new_ids[number]] * len(joining)
            member_ids += joining
    cursor.execute(_MEMBERS_SQL, [board_id, array_literal(cohort_ids), array_literal(member_ids)])
    cursor.execute(_BOARD_FILL_SQL, [len(member_ids), board_id])
    return len(member_ids)
