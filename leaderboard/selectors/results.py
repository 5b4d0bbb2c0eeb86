"""Stored match results: a player's (staff search), each player's latest (ingestion), which
seasons have any (the admin's season delete)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import TypeVar

from django.db import connection
from django.db.models import Exists, Model, OuterRef, QuerySet

from ..codec import BIGINT_MAX
from ..models import Board, MatchResult
from ._sql import BANS, RESULTS

M = TypeVar("M", bound=Model)


def match_results_of_player(
    *, player_id: int, queryset: QuerySet[MatchResult] | None = None
) -> QuerySet[MatchResult]:
    """A player's results on every board, found through the player index.

    ``player_id`` has no index of its own (each index is one more write per ingested result);
    match_result_board_player_idx leads with board_id. Naming every board lets PostgreSQL
    descend that index once per board instead of reading the whole table.
    """
    results = MatchResult.objects.all() if queryset is None else queryset
    if not 1 <= player_id <= BIGINT_MAX:
        return results.none()
    board_ids = list(Board.objects.order_by("id").values_list("id", flat=True))
    return results.filter(board_id__in=board_ids, player_id=player_id)


def seasons_with_results(*, season_ids: Iterable[int]) -> set[int]:
    """Which of ``season_ids`` have stored match results: one query, an EXISTS per board.

    Through match_result_board_player_idx (``season_id`` has no index of its own): a check
    costs the number of boards, never the number of results.
    """
    results = MatchResult.objects.filter(board_id=OuterRef("pk"))
    scored = Board.objects.filter(season_id__in=set(season_ids)).filter(Exists(results))
    return set(scored.order_by().values_list("season_id", flat=True))


def rows_of_player_on_every_board(
    *, queryset: QuerySet[M], player_id: int, via: str = ""
) -> QuerySet[M]:
    """``queryset``'s rows of a player, found through an index that leads with the board
    ((board, player_id): memberships, participants, refusals, standings, grants), every board
    named as match_results_of_player does. ``via``: the relation holding the board and the
    player (``"memberships__"``: a cohort's), both in one filter so they name the same row."""
    if not 1 <= player_id <= BIGINT_MAX:
        return queryset.none()
    board_ids = list(Board.objects.order_by("id").values_list("id", flat=True))
    return queryset.filter(**{f"{via}board_id__in": board_ids, f"{via}player_id": player_id})


@dataclass(frozen=True, slots=True)
class LatestResults:
    """The match id of each player's latest counted result on latest-rule boards."""

    season_long: dict[tuple[int, int], uuid.UUID]  # (board, player) -> match id
    daily: dict[tuple[int, int, date], uuid.UUID]  # (board, player, UTC day) -> match id


def latest_results_get(*, candidates: Iterable[tuple[int, int, datetime]]) -> LatestResults:
    """Which stored result is each player's latest, season-long and of its UTC day, on the
    boards named by ``candidates`` (board id, player id, a result's achieved_at).

    The latest by achieved_at; an exact tie goes to the greater match id (the order the rebuild
    uses), so the answer never depends on the order results were delivered in. Only counted
    results compete: voided ones and banned players' are left out.
    """
    pairs = sorted({(board, player) for board, player, _ in candidates})
    days = sorted(
        {(board, player, moment.astimezone(UTC).date()) for board, player, moment in candidates}
    )
    counted = f"""
        r.voided_at IS NULL AND NOT EXISTS (
            SELECT 1 FROM {BANS} b WHERE b.season_id = r.season_id AND b.player_id = r.player_id
        )
    """  # noqa: S608
    season_long_sql = f"""
        SELECT DISTINCT ON (r.board_id, r.player_id) r.board_id, r.player_id, r.match_id
        FROM {RESULTS} r
        JOIN unnest(%s::bigint[], %s::bigint[]) AS t(board_id, player_id)
          ON r.board_id = t.board_id AND r.player_id = t.player_id
        WHERE {counted}
        ORDER BY r.board_id, r.player_id, r.achieved_at DESC, r.match_id DESC
    """  # noqa: S608
    daily_sql = f"""
        SELECT DISTINCT ON (r.board_id, r.player_id, t.day) r.board_id, r.player_id, t.day,
               r.match_id
        FROM {RESULTS} r
        JOIN unnest(%s::bigint[], %s::bigint[], %s::date[]) AS t(board_id, player_id, day)
          ON r.board_id = t.board_id AND r.player_id = t.player_id
         AND r.achieved_at >= (t.day::timestamp AT TIME ZONE 'UTC')
         AND r.achieved_at < ((t.day + 1)::timestamp AT TIME ZONE 'UTC')
        WHERE {counted}
        ORDER BY r.board_id, r.player_id, t.day, r.achieved_at DESC, r.match_id DESC
    """  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(season_long_sql, [[b for b, _ in pairs], [p for _, p in pairs]])
        season_long = {(int(row[0]), int(row[1])): row[2] for row in cursor.fetchall()}
        cursor.execute(
            daily_sql, [[b for b, _, _ in days], [p for _, p, _ in days], [d for _, _, d in days]]
        )
        daily = {(int(row[0]), int(row[1]), row[2]): row[3] for row in cursor.fetchall()}
    return LatestResults(season_long=season_long, daily=daily)
