"""Writes on seasons."""

from __future__ import annotations

from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import transaction

from leaderboard.codec import CodecError, ScoreCodec

from .models import ScoringRule, Season


@transaction.atomic
def season_create(
    *,
    season_id: int,
    name: str,
    starts_at: datetime,
    ends_at: datetime,
    rule: str = ScoringRule.BEST,
    time_resolution_seconds: int = 1,
) -> Season:
    """Create a season and fix its score codec split from its length and time resolution."""
    if Season.objects.filter(id=season_id).exists():
        raise ValidationError(f"season {season_id} already exists")
    if rule not in ScoringRule.values:
        raise ValidationError(f"rule must be one of {', '.join(ScoringRule.values)}, got {rule!r}")
    if starts_at.tzinfo is None or ends_at.tzinfo is None:
        raise ValidationError("starts_at and ends_at must carry a UTC offset")
    if ends_at <= starts_at:
        raise ValidationError("ends_at must be after starts_at")
    try:
        codec = ScoreCodec.for_window(
            duration=ends_at - starts_at, resolution_seconds=time_resolution_seconds
        )
    except CodecError as exc:
        raise ValidationError(str(exc)) from exc
    season = Season(
        id=season_id,
        name=name,
        starts_at=starts_at,
        ends_at=ends_at,
        rule=rule,
        time_resolution_seconds=time_resolution_seconds,
        time_bits=codec.time_bits,
    )
    season.full_clean()
    season.save(force_insert=True)
    return season
