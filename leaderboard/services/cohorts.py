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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from django.db.backends.utils import CursorWrapper

from ..models import Cohort, CohortMember

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
_NEW_COHORT_SQL = f"""
    INSERT INTO {_COHORTS} (board_id, number, tier, members, opened_at)
    VALUES (%s, %s, %s, 0, now()) RETURNING id
"""  # noqa: S608
_FILL_SQL = f"""
    UPDATE {_COHORTS} c SET members = c.members + f.added
    FROM unnest(%s::bigint[], %s::int[]) AS f(id, added) WHERE c.id = f.id
"""  # noqa: S608
_MEMBERS_SQL = f"""
    INSERT INTO {_MEMBERS} (board_id, cohort_id, player_id, joined_at)
    SELECT %s, c, p, now() FROM unnest(%s::bigint[], %s::bigint[]) AS m(c, p)
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
        # tier -> [cohort id, members]: the newest cohort of each tier, open while not full.
        open_of: dict[int | None, list[int]] = {
            tier: [cohort_id, members]
            for cohort_id, _number, tier, members in cursor.fetchall()
            if members < size
        }
        cursor.execute(_LAST_NUMBER_SQL, [board_id])
        row = cursor.fetchone()
        last_number = int(row[0]) if row else 0
        added: dict[int, int] = {}
        member_cohorts: list[int] = []
        member_players: list[int] = []
        for candidate in players:
            current = open_of.get(candidate.tier)
            if current is None or current[1] >= size:
                last_number += 1
                cursor.execute(_NEW_COHORT_SQL, [board_id, last_number, candidate.tier])
                created = cursor.fetchone()
                assert created is not None
                current = open_of[candidate.tier] = [int(created[0]), 0]
            current[1] += 1
            added[current[0]] = added.get(current[0], 0) + 1
            member_cohorts.append(current[0])
            member_players.append(candidate.player_id)
        cursor.execute(_FILL_SQL, [list(added), list(added.values())])
        cursor.execute(_MEMBERS_SQL, [board_id, member_cohorts, member_players])
        joined += len(member_players)
    return joined
