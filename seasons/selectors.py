"""Reads on seasons."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ingestion.selectors import board_scores_top

from .models import FinalStanding, Season, SeasonStatus


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


def season_standings_compute(*, season: Season, limit: int) -> list[StandingRow]:
    """The season's top ``limit`` from PostgreSQL (the aggregation a rebuild loads), never from
    Redis, which may have lost writes. Ranks follow the board: encoded score, then the lower
    player id for an exact tie, so ranks are distinct and reproducible."""
    codec = season.codec
    return [
        StandingRow(
            rank=index,
            player_id=score.player_id,
            points=score.points,
            # What the board shows: the start of the tick the score is credited to.
            reached_at=season.starts_at + codec.decode(score.score).elapsed,
        )
        for index, score in enumerate(board_scores_top(season=season, limit=limit), start=1)
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
