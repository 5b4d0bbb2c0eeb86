"""Tournaments' reads (docs/tournaments.md): each entry's attempts on a board with max-attempts,
and the seats taken on the boards players join.

Attempts are the player's stored results on the board (voided ones included: voiding does not
give an attempt back), the same count ingestion decides by; read with one statement per list of
entries, through the results' (board, player, ...) index, never per entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TypeVar

from django.db import connection

from seasons.memo import ProcessMemo, process_memo

from ..models import Board, MatchResult
from ._sql import array_literal
from .boards import BoardRef

E = TypeVar("E")

_RESULTS = MatchResult._meta.db_table

_ATTEMPTS_SQL = f"""
    SELECT r.player_id, count(*) FROM {_RESULTS} r
    WHERE r.board_id = %s AND r.player_id = ANY(%s::text::bigint[])
    GROUP BY r.player_id
"""  # noqa: S608 -- the table name comes from the model


def player_attempts_get(*, board_id: int, player_ids: Sequence[int]) -> dict[int, int]:
    """Each player's attempts on the board (0 for one without results)."""
    attempts = dict.fromkeys(player_ids, 0)
    if not player_ids:
        return attempts
    with connection.cursor() as cursor:
        cursor.execute(_ATTEMPTS_SQL, [board_id, array_literal(sorted(set(player_ids)))])
        attempts.update(dict(cursor.fetchall()))
    return attempts


def entries_with_attempts(*, board: BoardRef, entries: Sequence[E]) -> list[E]:
    """``entries`` (frozen dataclasses with ``player_id`` and ``attempts``) with each player's
    attempts on a board with max-attempts; as they are elsewhere."""
    if board.max_attempts is None or not entries:
        return list(entries)
    attempts = player_attempts_get(
        board_id=board.id,
        player_ids=[e.player_id for e in entries],  # type: ignore[attr-defined]
    )
    return [
        replace(e, attempts=attempts[e.player_id])  # type: ignore[attr-defined, type-var]
        for e in entries
    ]


# Seats taken change with every join: memoized briefly per process (the boards list is
# public and hot), and served stale while PostgreSQL cannot be read (seasons/memo.py).
_participants: ProcessMemo[int, int] = process_memo(
    ttl_setting="LEADERBOARD_PARTICIPANTS_CACHE_SECONDS",
    fallback_setting="LEADERBOARD_SEASON_FALLBACK_SECONDS",
)


def board_participants_get(*, boards: Sequence[BoardRef]) -> dict[int, int]:
    """Players who joined each board that requires joining, by board id (others left out)."""
    wanted = [b.id for b in boards if b.join_required]
    if not wanted:
        return {}

    def load(board_ids: list[int]) -> dict[int, int]:
        found = dict(Board.objects.filter(id__in=board_ids).values_list("id", "participants"))
        return {board_id: found.get(board_id, 0) for board_id in board_ids}

    return _participants.get_many(wanted, load)
