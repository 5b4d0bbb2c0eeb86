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

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.backends.utils import CursorWrapper

from ..models import Board, Cohort, CohortMember

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
    SELECT %s, n, t, m, now() FROM unnest(%s::int[], %s::int[], %s::int[]) AS f(n, t, m)
    RETURNING number, id
"""  # noqa: S608
_BOARD_FILL_SQL = f"UPDATE {_BOARDS} SET cohort_members = cohort_members + %s WHERE id = %s"  # noqa: S608
_FILL_SQL = f"""
    UPDATE {_COHORTS} c SET members = c.members + f.added
    FROM unnest(%s::bigint[], %s::int[]) AS f(id, added) WHERE c.id = f.id
"""  # noqa: S608
# In player order: the unique (board, player) index then grows in runs rather than at random.
_MEMBERS_SQL = f"""
    INSERT INTO {_MEMBERS} (board_id, cohort_id, player_id, joined_at)
    SELECT %s, c, p, now() FROM unnest(%s::bigint[], %s::bigint[]) AS m(c, p) ORDER BY p
"""  # noqa: S608


@dataclass(frozen=True, slots=True)
class CohortCandidate:
    """A player of the batch with no cohort yet on a board with cohorts, in assignment order
    (their first result first)."""

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
    board's cohort size), opening cohorts as they fill. The caller holds the boards' locks
    (``cohorts_lock``) and found the candidates after taking them; a player listed twice joins
    once. Returns how many players joined a cohort."""
    by_board: dict[int, list[CohortCandidate]] = {}
    seen: set[tuple[int, int]] = set()
    for candidate in candidates:
        key = (candidate.board_id, candidate.player_id)
        if key not in seen:
            seen.add(key)
            by_board.setdefault(candidate.board_id, []).append(candidate)
    joined = 0
    for board_id, players in sorted(by_board.items()):
        size = sizes[board_id]
        cursor.execute(_OPEN_SQL, [board_id])
        # tier -> [cohort, members]: the newest cohort of each tier, open while not full. A
        # cohort is ("id", its id) when it exists, ("new", its number) when this batch opens it.
        open_of: dict[int | None, list[Any]] = {
            tier: [("id", cohort_id), members]
            for cohort_id, _number, tier, members in cursor.fetchall()
            if members < size
        }
        cursor.execute(_LAST_NUMBER_SQL, [board_id])
        row = cursor.fetchone()
        last_number = int(row[0]) if row else 0
        opened: dict[int, int | None] = {}  # number -> tier, of the cohorts opened now
        placed: list[tuple[tuple[str, int], int]] = []  # (cohort, player)
        for candidate in players:
            current = open_of.get(candidate.tier)
            if current is None or current[1] >= size:
                last_number += 1
                opened[last_number] = candidate.tier
                current = open_of[candidate.tier] = [("new", last_number), 0]
            current[1] += 1
            placed.append((current[0], candidate.player_id))
        added = Counter(cohort for cohort, _ in placed)
        ids: dict[tuple[str, int], int] = {}
        if opened:
            numbers = list(opened)
            cursor.execute(
                _NEW_COHORTS_SQL,
                [
                    board_id,
                    numbers,
                    [opened[n] for n in numbers],
                    [added[("new", n)] for n in numbers],
                ],
            )
            ids = {("new", int(number)): int(cohort_id) for number, cohort_id in cursor}
        filled = [cohort for cohort in added if cohort[0] == "id"]
        if filled:
            cursor.execute(_FILL_SQL, [[c[1] for c in filled], [added[c] for c in filled]])
        cursor.execute(
            _MEMBERS_SQL,
            [
                board_id,
                [ids[cohort] if cohort[0] == "new" else cohort[1] for cohort, _ in placed],
                [player for _, player in placed],
            ],
        )
        cursor.execute(_BOARD_FILL_SQL, [len(placed), board_id])
        joined += len(placed)
    return joined
