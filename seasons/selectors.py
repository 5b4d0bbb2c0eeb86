"""Reads on seasons.

The read API resolves a season on every request; ``season_get_cached`` keeps a short-lived
per-process memo so the hot endpoints make no SQL query once a season is known. Its dates and
status only matter to the read path at the scale of the memo's few seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import QuerySet

from .memo import ProcessMemo, process_memo
from .models import Season, SeasonStatus


@dataclass(frozen=True, slots=True)
class SeasonRef:
    """What the read path needs of a season, detached from the ORM."""

    id: int
    name: str
    status: str
    starts_at: datetime
    ends_at: datetime

    @classmethod
    def from_model(cls, season: Season) -> SeasonRef:
        return cls(
            id=season.id,
            name=season.name,
            status=season.status,
            starts_at=season.starts_at,
            ends_at=season.ends_at,
        )


_seasons: ProcessMemo[int, SeasonRef | None] = process_memo(
    ttl_setting="LEADERBOARD_SEASON_CACHE_SECONDS",
    fallback_setting="LEADERBOARD_SEASON_FALLBACK_SECONDS",
)


def season_get_cached(*, season_id: int) -> SeasonRef | None:
    """The season, or None if it does not exist; memoized for LEADERBOARD_SEASON_CACHE_SECONDS."""

    def load() -> SeasonRef | None:
        season = Season.objects.filter(id=season_id).first()
        return SeasonRef.from_model(season) if season is not None else None

    return _seasons.get(season_id, load)


def season_list() -> QuerySet[Season]:
    """Every season, the most recent start first."""
    return Season.objects.order_by("-starts_at", "-id")


def season_list_active(*, include_closing: bool = False) -> list[Season]:
    """Seasons taking results now (status kept in step with the dates by season_statuses_sync).

    ``include_closing`` adds the seasons that stopped taking results but whose close-out has not
    finished: their boards still change while the consumer drains.
    """
    statuses = [SeasonStatus.ACTIVE]
    if include_closing:
        statuses.append(SeasonStatus.CLOSING)
    return list(Season.objects.filter(status__in=statuses).order_by("id"))
