"""Tiered leagues, the read side (docs/leagues.md): the tier a player plays in on a league
board (from the league's earlier movements, for the assignment: services/leagues.py), the tier
of each entry of a league board, and how a cohort would move if its season ended now.

A player's tier on a league board is their cohort's, and their cohort never changes: once
found, it is memoized per process for good. A player without a cohort yet (the board waits for
the previous season's close-out, or their first result is still on its way) reads null, and is
looked up again after NO_TIER_SECONDS.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from cachetools import LRUCache, TTLCache
from django.db import connection
from django.db.backends.utils import CursorWrapper

from seasons.leagues import league_movements
from seasons.memo import process_state_register
from seasons.models import Season, SeasonStatus

from ..models import Board, Cohort, CohortMember, LeagueMovement
from ._sql import array_literal
from .boards import BoardRef

E = TypeVar("E")

_BOARDS = Board._meta.db_table
_SEASONS = Season._meta.db_table
_MOVEMENTS = LeagueMovement._meta.db_table


@dataclass(frozen=True, slots=True)
class LeaguePlace:
    """Where a league board stands in its league: the schedule and occurrence of its season,
    its slug (the league's name among the schedule's boards) and how many tiers it has."""

    board_id: int
    slug: str
    schedule_id: int | None
    occurrence: int | None
    tiers: int


# Each player's latest movement on an earlier board of the league (the player-led index).
_NEXT_TIERS_SQL = f"""
    SELECT DISTINCT ON (m.player_id) m.player_id, m.next_tier
    FROM {_MOVEMENTS} m
    JOIN {_BOARDS} b ON b.id = m.board_id
    JOIN {_SEASONS} s ON s.id = b.season_id
    WHERE m.player_id = ANY(%s::text::bigint[]) AND b.slug = %s AND s.schedule_id = %s
      AND s.occurrence < %s
    ORDER BY m.player_id, s.occurrence DESC
"""  # noqa: S608 -- table names come from the models

# The status of the season of the league's previous board, if there is one.
_PREVIOUS_SQL = f"""
    SELECT s.id, s.status FROM {_BOARDS} b JOIN {_SEASONS} s ON s.id = b.season_id
    WHERE s.schedule_id = %s AND s.occurrence < %s AND b.slug = %s AND cardinality(b.tiers) > 0
    ORDER BY s.occurrence DESC LIMIT 1
"""  # noqa: S608


def league_tiers_get(
    *, cursor: CursorWrapper, place: LeaguePlace, player_ids: Sequence[int]
) -> dict[int, int]:
    """Each player's tier on the league board (a position in its tiers): their latest
    movement's next tier on an earlier board of the league (beyond this board's top tier: its
    top tier), else the first tier (0)."""
    tiers = dict.fromkeys(player_ids, 0)
    if place.schedule_id is None or place.occurrence is None or not player_ids:
        return tiers
    cursor.execute(
        _NEXT_TIERS_SQL,
        [array_literal(list(tiers)), place.slug, place.schedule_id, place.occurrence],
    )
    top = place.tiers - 1
    for player_id, next_tier in cursor.fetchall():
        tiers[player_id] = min(int(next_tier), top)
    return tiers


def league_previous_open(
    *, cursor: CursorWrapper, schedule_id: int | None, occurrence: int | None, slug: str
) -> int | None:
    """The id of the season of the league's previous board while it is not closed (its
    close-out has not decided the tiers yet); None when it is closed or there is none."""
    if schedule_id is None or occurrence is None:
        return None
    cursor.execute(_PREVIOUS_SQL, [schedule_id, occurrence, slug])
    row = cursor.fetchone()
    if row is None or row[1] == SeasonStatus.CLOSED:
        return None
    return int(row[0])


# How long a player found in no cohort of a league board reads null before the next look.
NO_TIER_SECONDS = 1.0

_COHORT_TIERS_SQL = f"""
    SELECT m.player_id, c.tier FROM {CohortMember._meta.db_table} m
    JOIN {Cohort._meta.db_table} c ON c.id = m.cohort_id
    WHERE m.board_id = %s AND m.player_id = ANY(%s)
"""  # noqa: S608 -- table names come from the models

_lock = threading.Lock()
_tier_of: LRUCache[tuple[int, int], int] = LRUCache(maxsize=200_000)
_no_tier: TTLCache[tuple[int, int], bool] = TTLCache(maxsize=20_000, ttl=NO_TIER_SECONDS)


class _Memos:
    def clear(self) -> None:
        with _lock:
            _tier_of.clear()
            _no_tier.clear()


process_state_register(_Memos())


def player_tiers_get(*, board: BoardRef, player_ids: Sequence[int]) -> dict[int, int | None]:
    """Each player's tier on the league board (a position in its tiers); None for a player in
    no cohort. One query for the players this process has not seen in a cohort yet."""
    found: dict[int, int | None] = {}
    missing: list[int] = []
    with _lock:
        for player_id in player_ids:
            key = (board.id, player_id)
            tier = _tier_of.get(key)
            if tier is not None:
                found[player_id] = tier
            elif key in _no_tier:
                found[player_id] = None
            else:
                missing.append(player_id)
    if missing:
        with connection.cursor() as cursor:
            cursor.execute(_COHORT_TIERS_SQL, [board.id, missing])
            rows = {int(player_id): tier for player_id, tier in cursor.fetchall()}
        with _lock:
            for player_id in missing:
                tier = rows.get(player_id)
                found[player_id] = tier
                if tier is None:
                    _no_tier[(board.id, player_id)] = True
                else:
                    _tier_of[(board.id, player_id)] = int(tier)
    return found


def entries_with_tiers(*, board: BoardRef, entries: Sequence[E]) -> list[E]:
    """``entries`` (any frozen dataclass with ``player_id`` and ``tier``) with each player's
    tier name on a league board (null for a player in no cohort yet); as they are elsewhere."""
    if not board.tiers or not entries:
        return list(entries)
    tiers = player_tiers_get(
        board=board,
        player_ids=[e.player_id for e in entries],  # type: ignore[attr-defined]
    )
    return [
        replace(e, tier=board.tier_name(tiers[e.player_id]))  # type: ignore[attr-defined, type-var]
        for e in entries
    ]


def cohort_movements_projected(
    *, board: BoardRef, tier: int | None, ranks: Sequence[int]
) -> list[str | None]:
    """How each member of a cohort of ``tier`` would move if the season ended now, from their
    ranks within it (best first, equal keys sharing a rank): the close-out's rule
    (seasons.leagues.league_movement) over the members with a score. None off a league."""
    if not board.tiers or tier is None:
        return [None] * len(ranks)
    return list(
        league_movements(
            ranks=ranks,
            players=len(ranks),
            tier=tier,
            tiers=len(board.tiers),
            promote_percent=board.promote_percent,
            relegate_percent=board.relegate_percent,
        )
    )


def league_waiting_for(*, board: BoardRef) -> int | None:
    """The season a league board's cohorts wait for (the previous season of its league, not
    closed yet); None when they have formed, or off a league. Fresh from PostgreSQL."""
    if not board.tiers:
        return None
    found = (
        Board.objects.filter(id=board.id)
        .select_related("season")
        .only("league_waiting", "slug", "season__schedule_id", "season__occurrence")
        .first()
    )
    if found is None or not found.league_waiting:
        return None
    with connection.cursor() as cursor:
        return league_previous_open(
            cursor=cursor,
            schedule_id=found.season.schedule_id,
            occurrence=found.season.occurrence,
            slug=found.slug,
        )
