"""Reads on seasons."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection

from .models import FinalStanding, ScoringRule, Season, SeasonStatus


def season_list_active(*, include_closing: bool = False) -> list[Season]:
    """Seasons taking results now (status kept in step with the dates by season_statuses_sync).

    ``include_closing`` adds the seasons that stopped taking results but whose close-out has not
    finished: their boards still change while the consumer drains.
    """
    statuses = [SeasonStatus.ACTIVE]
    if include_closing:
        statuses.append(SeasonStatus.CLOSING)
    return list(Season.objects.filter(status__in=statuses).order_by("id"))


@dataclass(frozen=True)
class StandingRow:
    rank: int
    player_id: int
    points: int
    reached_at: datetime


# One row per counted player, ranked as the board ranks: points first, then the earlier tick
# (what the score codec's low bits encode); an exact tie falls to the lower player id so ranks
# are distinct and reproducible (Redis would order such a tie by member bytes).
_BEST_SQL = """
WITH per_player AS (
    SELECT DISTINCT ON (r.player_id) r.player_id, r.points, r.achieved_at
    FROM ingestion_matchresult r
    WHERE r.season_id = %(season_id)s AND r.voided_at IS NULL
    ORDER BY r.player_id, r.points DESC, r.achieved_at ASC
), scored AS (
    SELECT player_id, points,
           floor(extract(epoch FROM achieved_at - %(starts_at)s) / %(resolution)s)::bigint AS ticks
    FROM per_player
)
SELECT player_id, points, ticks FROM scored
ORDER BY points DESC, ticks ASC, player_id ASC
LIMIT %(limit)s
"""

_CUMULATIVE_SQL = """
WITH per_player AS (
    SELECT r.player_id, sum(r.points)::bigint AS points,
           max(floor(extract(epoch FROM r.achieved_at - %(starts_at)s) / %(resolution)s))::bigint
               AS ticks
    FROM ingestion_matchresult r
    WHERE r.season_id = %(season_id)s AND r.voided_at IS NULL
    GROUP BY r.player_id
)
SELECT player_id, points, ticks FROM per_player
ORDER BY points DESC, ticks ASC, player_id ASC
LIMIT %(limit)s
"""


def season_standings_compute(*, season: Season, limit: int) -> list[StandingRow]:
    """The season's top ``limit`` computed from PostgreSQL (the source of truth), never Redis."""
    sql = _CUMULATIVE_SQL if season.rule == ScoringRule.CUMULATIVE else _BEST_SQL
    params: dict[str, int | datetime] = {
        "season_id": season.id,
        "starts_at": season.starts_at,
        "resolution": season.time_resolution_seconds,
        "limit": limit,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    step = timedelta(seconds=season.time_resolution_seconds)
    return [
        StandingRow(
            rank=index,
            player_id=int(player_id),
            points=int(points),
            reached_at=season.starts_at + step * int(ticks),
        )
        for index, (player_id, points, ticks) in enumerate(rows, start=1)
    ]


class SeasonNotFinal(Exception):
    """The season is unknown or not closed: it has no final standings (yet)."""


def season_final_standings_list(*, season_id: int, limit: int) -> list[FinalStanding]:
    """A closed season's final entries, best first; SeasonNotFinal says why there are none."""
    season = Season.objects.filter(id=season_id).only("id", "status").first()
    if season is None:
        raise SeasonNotFinal(f"season {season_id} does not exist")
    if season.status != SeasonStatus.CLOSED:
        raise SeasonNotFinal(
            f"season {season_id} is {season.status}; final standings exist once it is closed"
        )
    return list(FinalStanding.objects.filter(season_id=season_id).order_by("rank")[:limit])
