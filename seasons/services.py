"""Writes on seasons."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from .models import Season, SeasonStatus

logger = logging.getLogger(__name__)


@transaction.atomic
def season_create(
    *,
    season_id: int,
    name: str,
    starts_at: datetime,
    ends_at: datetime,
) -> Season:
    """Create a season (its boards come from leaderboard.services.season_setup)."""
    if Season.objects.filter(id=season_id).exists():
        raise ValidationError(f"season {season_id} already exists")
    if starts_at.tzinfo is None or ends_at.tzinfo is None:
        raise ValidationError("starts_at and ends_at must carry a UTC offset")
    if ends_at <= starts_at:
        raise ValidationError("ends_at must be after starts_at")
    season = Season(id=season_id, name=name, starts_at=starts_at, ends_at=ends_at)
    season.full_clean()
    season.save(force_insert=True)
    return season


# --- Lifecycle -----------------------------------------------------------------------------------

# What staff may do by hand. Time moves seasons forward on its own (season_statuses_sync);
# "closed" is reached only through season_close, and nothing leaves it.
_MANUAL_TRANSITIONS: dict[str, frozenset[str]] = {
    SeasonStatus.SCHEDULED: frozenset({SeasonStatus.ACTIVE, SeasonStatus.CLOSING}),
    SeasonStatus.ACTIVE: frozenset({SeasonStatus.CLOSING}),
    # Reopening is for a season whose end staff pushed back before close-out began in earnest.
    SeasonStatus.CLOSING: frozenset({SeasonStatus.ACTIVE}),
    SeasonStatus.CLOSED: frozenset(),
}


@dataclass(frozen=True)
class StatusSyncResult:
    activated: tuple[int, ...]
    closing: tuple[int, ...]


def season_statuses_sync(*, now: datetime | None = None) -> StatusSyncResult:
    """Move seasons forward as their dates pass: scheduled -> active at starts_at, scheduled or
    active -> closing at ends_at. Never backwards, never to closed (that is season_close's)."""
    now = now or timezone.now()
    # Seasons are locked FOR NO KEY UPDATE (no_key=True) everywhere: ingestion holds FOR KEY
    # SHARE on a batch's seasons for the whole batch (leaderboard/services/results.py), which
    # conflicts with FOR UPDATE; SKIP LOCKED would then skip a season that is busy ingesting,
    # and a plain lock would wait for its batch.
    with transaction.atomic():
        closing = list(
            Season.objects.select_for_update(no_key=True, skip_locked=True)
            .filter(status__in=[SeasonStatus.SCHEDULED, SeasonStatus.ACTIVE], ends_at__lte=now)
            .values_list("id", flat=True)
        )
        Season.objects.filter(id__in=closing).update(
            status=SeasonStatus.CLOSING, closing_since=now, updated_at=now
        )
        activated = list(
            Season.objects.select_for_update(no_key=True, skip_locked=True)
            .filter(status=SeasonStatus.SCHEDULED, starts_at__lte=now, ends_at__gt=now)
            .values_list("id", flat=True)
        )
        Season.objects.filter(id__in=activated).update(status=SeasonStatus.ACTIVE, updated_at=now)
    if closing or activated:
        logger.info("season statuses: activated %s, closing %s", activated, closing)
    return StatusSyncResult(activated=tuple(sorted(activated)), closing=tuple(sorted(closing)))


@transaction.atomic
def season_status_transition(
    *, season_id: int, to_status: str, now: datetime | None = None
) -> Season:
    """A transition asked for by staff, validated against the lifecycle and the dates."""
    now = now or timezone.now()
    try:
        season = Season.objects.select_for_update(no_key=True).get(id=season_id)
    except Season.DoesNotExist as exc:
        raise ValidationError(f"season {season_id} does not exist") from exc
    if to_status not in SeasonStatus.values:
        raise ValidationError(f"unknown status {to_status!r}")
    if to_status == season.status:
        return season
    if to_status == SeasonStatus.CLOSED:
        raise ValidationError("a season is closed only by its close-out (season_close)")
    if to_status not in _MANUAL_TRANSITIONS[season.status]:
        raise ValidationError(f"season {season.id} cannot go from {season.status} to {to_status}")
    if to_status == SeasonStatus.ACTIVE and season.ends_at <= now:
        raise ValidationError(
            f"season {season.id} ended at {season.ends_at.isoformat()}; "
            "move its end first to reopen it"
        )
    season.status = to_status
    season.closing_since = now if to_status == SeasonStatus.CLOSING else None
    # A reopened season drains afresh at its next close-out.
    season.drain_end_offsets = None
    season.save(update_fields=["status", "closing_since", "drain_end_offsets", "updated_at"])
    logger.info("season %s: status set to %s by staff", season.id, to_status)
    return season


def season_keys_released(*, season_id: int, now: datetime | None = None) -> bool:
    """Record that the closed season's Redis keys are unlinked (the first time only); False
    when the season is not closed or was recorded already."""
    return bool(
        Season.objects.filter(
            id=season_id, status=SeasonStatus.CLOSED, keys_released_at=None
        ).update(keys_released_at=now or timezone.now())
    )
