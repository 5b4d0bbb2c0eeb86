"""Reads on seasons.

The read API resolves a season on every request; ``season_get_cached`` keeps a short-lived
per-process memo so the hot endpoints make no SQL query once a season is known. A season's
codec split never changes, and its dates and status only matter to the read path at the
scale of the memo's few seconds.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db.models import QuerySet

from leaderboard.codec import ScoreCodec

from .models import Season, SeasonStatus

# Bounds the memo against clients probing random season ids (each miss is memoized too).
_MEMO_MAX_ENTRIES = 10_000


@dataclass(frozen=True, slots=True)
class SeasonRef:
    """What the read path needs of a season, detached from the ORM."""

    id: int
    name: str
    status: str
    rule: str
    starts_at: datetime
    ends_at: datetime
    codec: ScoreCodec

    @classmethod
    def from_model(cls, season: Season) -> SeasonRef:
        return cls(
            id=season.id,
            name=season.name,
            status=season.status,
            rule=season.rule,
            starts_at=season.starts_at,
            ends_at=season.ends_at,
            codec=season.codec,
        )


_memo: dict[int, tuple[float, SeasonRef | None]] = {}
_memo_lock = threading.Lock()


def season_get_cached(*, season_id: int) -> SeasonRef | None:
    """The season, or None if it does not exist; memoized for LEADERBOARD_SEASON_CACHE_SECONDS.

    Misses are memoized as well: a client asking for an unknown season in a loop must not
    turn into one SQL query per request.
    """
    now = time.monotonic()
    hit = _memo.get(season_id)
    if hit is not None and hit[0] > now:
        return hit[1]
    season = Season.objects.filter(id=season_id).first()
    ref = SeasonRef.from_model(season) if season is not None else None
    with _memo_lock:
        if len(_memo) >= _MEMO_MAX_ENTRIES:
            _memo.clear()
        _memo[season_id] = (now + settings.LEADERBOARD_SEASON_CACHE_SECONDS, ref)
    return ref


def season_cache_clear() -> None:
    """Forget every memoized season (tests; a process that must see a change at once)."""
    with _memo_lock:
        _memo.clear()


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
