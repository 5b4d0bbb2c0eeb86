"""Writes on seasons."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from kafka.errors import KafkaError

from leaderboard import keys
from leaderboard.codec import CodecError, ScoreCodec
from leaderboard.redis import get_board_redis

from .models import (
    FinalStanding,
    GrantStatus,
    RewardGrant,
    RewardTier,
    ScoringRule,
    Season,
    SeasonStatus,
)
from .selectors import (
    StandingRow,
    consumer_group_lag_get,
    kafka_offsets_reader,
    season_standings_compute,
    topic_end_offsets_get,
)

logger = logging.getLogger(__name__)


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
    # SHARE on a batch's seasons for the whole batch (ingestion/services.py), which conflicts
    # with FOR UPDATE; SKIP LOCKED would then skip a season that is busy ingesting, and a
    # plain lock would wait for its batch.
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


# --- Reward tiers and grants ---------------------------------------------------------------------


@transaction.atomic
def reward_tier_create(
    *, season_id: int, rank_from: int, rank_to: int, reward_name: str, quantity: int = 1
) -> RewardTier:
    """Add a tier; ranks start at 1, rank_from <= rank_to, and tiers of a season never overlap
    (checked here with the season locked, and by an exclusion constraint in the database)."""
    season = Season.objects.select_for_update(no_key=True).filter(id=season_id).first()
    if season is None:
        raise ValidationError(f"season {season_id} does not exist")
    if season.status == SeasonStatus.CLOSED:
        raise ValidationError(f"season {season_id} is closed; its rewards were granted")
    tier = RewardTier(
        season=season,
        rank_from=rank_from,
        rank_to=rank_to,
        reward_name=reward_name,
        quantity=quantity,
    )
    tier.full_clean()
    tier.save(force_insert=True)
    return tier


def reward_grant_status_set(*, grant_id: int, status: str) -> RewardGrant:
    if status not in GrantStatus.values:
        raise ValidationError(f"status must be one of {', '.join(GrantStatus.values)}")
    grant = RewardGrant.objects.get(id=grant_id)
    if grant.status != status:
        grant.status = status
        grant.save(update_fields=["status", "updated_at"])
    return grant


# --- Close-out -----------------------------------------------------------------------------------


class CloseOutcome(StrEnum):
    CLOSED = "closed"
    ALREADY_CLOSED = "already_closed"
    DRAINING = "draining"  # within the grace after the switch to closing
    LAGGING = "lagging"  # the consumer has not drained the topic within the drain timeout
    IN_PROGRESS = "in_progress"


@dataclass(frozen=True)
class SeasonCloseResult:
    season_id: int
    outcome: CloseOutcome
    standings: int = 0
    grants_created: int = 0
    keys_unlinked: int = 0
    drain_until: datetime | None = None
    lagging: str = ""  # what the consumer has not drained yet (LAGGING)

    def describe(self) -> str:
        if self.outcome == CloseOutcome.LAGGING:
            return (
                f"season {self.season_id} is closing but NOT finalized: {self.lagging}. "
                "Nothing was copied or granted; the periodic close-out tries again (or run "
                "close_season again; --force finalizes without the queued results)"
            )
        if self.outcome == CloseOutcome.DRAINING:
            assert self.drain_until is not None
            return (
                f"season {self.season_id} is closing: it takes no more results, and its "
                f"close-out finishes after the consumer drained, at "
                f"{self.drain_until.isoformat()} (the periodic close-out task picks it up)"
            )
        if self.outcome == CloseOutcome.IN_PROGRESS:
            return f"season {self.season_id}: another close-out of it is running; nothing done here"
        if self.outcome == CloseOutcome.ALREADY_CLOSED:
            return (
                f"season {self.season_id} was already closed: nothing granted; "
                f"{self.keys_unlinked} leftover Redis keys unlinked"
            )
        return (
            f"season {self.season_id} closed: {self.standings} final standings, "
            f"{self.grants_created} reward grants, {self.keys_unlinked} Redis keys unlinked"
        )


def season_close(
    *,
    season_id: int,
    now: datetime | None = None,
    grace_seconds: int | None = None,
    drain_timeout_seconds: float | None = None,
    force: bool = False,
) -> SeasonCloseResult:
    """Close a season out; safe to run any number of times, and to resume after a crash.

    1. Status "closing". Ingestion still takes results achieved inside the window (those queued
       in Kafka at the switch must count), and rejects only closed seasons.
    2. Let the consumer drain. (a) A short grace, ``grace_seconds`` (SEASON_CLOSE_GRACE_SECONDS)
       after the switch, for results game servers publish just after the end; until then the
       call returns DRAINING. (b) Then the match-results topic's end offsets are recorded once on
       the season (``drain_end_offsets``), and the call polls until the consumer group has
       committed up to them on every partition, for at most ``drain_timeout_seconds``
       (SEASON_CLOSE_DRAIN_TIMEOUT_SECONDS); otherwise it returns LAGGING naming the partitions
       and finalizes nothing. A rerun waits on the same recorded offsets. ``force`` skips both.
    3. In ONE transaction: the final top FINAL_STANDINGS_SIZE computed from PostgreSQL (the
       source a rebuild reads; Redis may have lost writes), a grant per player of each tier,
       status "closed". A crash before the commit leaves the season "closing": a rerun redoes it.
    4. UNLINK every Redis key of the season. A rerun on a closed season grants nothing (and the
       unique (season, player) constraint forbids a second grant) and only unlinks leftovers.
    """
    now = now or timezone.now()
    grace = settings.SEASON_CLOSE_GRACE_SECONDS if grace_seconds is None else grace_seconds
    if drain_timeout_seconds is None:
        drain_timeout_seconds = settings.SEASON_CLOSE_DRAIN_TIMEOUT_SECONDS
    in_progress = SeasonCloseResult(season_id=season_id, outcome=CloseOutcome.IN_PROGRESS)
    with transaction.atomic():
        # SKIP LOCKED: a close-out that finds another one running (a slow standings query, a
        # second sweep) returns at once instead of holding a worker until the first finishes.
        season = (
            Season.objects.select_for_update(no_key=True, skip_locked=True)
            .filter(id=season_id)
            .first()
        )
        if season is None:
            if Season.objects.filter(id=season_id).exists():
                return in_progress
            raise ValidationError(f"season {season_id} does not exist")
        already_closed = season.status == SeasonStatus.CLOSED
        if not already_closed and season.status != SeasonStatus.CLOSING:
            season.status = SeasonStatus.CLOSING
            season.closing_since = now
            season.drain_end_offsets = None
            season.save(
                update_fields=["status", "closing_since", "drain_end_offsets", "updated_at"]
            )
            logger.info("season %s: closing (close-out asked for)", season.id)
    if not already_closed:
        drain_until = (season.closing_since or now) + timedelta(seconds=grace)
        if now < drain_until and not force:
            return SeasonCloseResult(
                season_id=season_id, outcome=CloseOutcome.DRAINING, drain_until=drain_until
            )
        if force:
            logger.warning(
                "season %s: close-out forced, without waiting for the consumer to drain", season_id
            )
        else:
            lagging = _season_drain_wait(season=season, timeout_seconds=drain_timeout_seconds)
            if lagging:
                result = SeasonCloseResult(
                    season_id=season_id, outcome=CloseOutcome.LAGGING, lagging=lagging
                )
                logger.warning(result.describe())
                return result
        finalized = _season_finalize(season_id=season_id, now=now)
        if finalized is None:
            return in_progress
        standings, grants_created = finalized
        if standings is None:  # someone else finalized it between our two transactions
            already_closed = True
    keys_unlinked = season_keys_unlink(season_id=season_id)
    if already_closed:
        return SeasonCloseResult(
            season_id=season_id, outcome=CloseOutcome.ALREADY_CLOSED, keys_unlinked=keys_unlinked
        )
    result = SeasonCloseResult(
        season_id=season_id,
        outcome=CloseOutcome.CLOSED,
        standings=standings or 0,
        grants_created=grants_created,
        keys_unlinked=keys_unlinked,
    )
    logger.info(result.describe())
    return result


# How often a waiting close-out asks Kafka for the consumer group's committed offsets.
_DRAIN_POLL_SECONDS = 0.25


def _season_drain_end_offsets(*, season: Season) -> dict[str, object]:
    """The end offsets the drain waits for: recorded once per closing, then reused by reruns."""
    if season.drain_end_offsets is not None:
        return season.drain_end_offsets
    topic = settings.KAFKA_MATCH_RESULTS_TOPIC
    ends = topic_end_offsets_get(topic=topic)
    record: dict[str, object] = {
        "topic": topic,
        "recorded_at": timezone.now().isoformat(),
        "partitions": {str(p): offset for p, offset in sorted(ends.items())},
    }
    # Only the first close-out records them; a concurrent one uses what that one stored.
    Season.objects.filter(
        id=season.id, status=SeasonStatus.CLOSING, drain_end_offsets__isnull=True
    ).update(drain_end_offsets=record)
    stored = Season.objects.filter(id=season.id).values_list("drain_end_offsets", flat=True).get()
    logger.info("season %s: draining %s up to %s", season.id, topic, stored)
    return stored if stored is not None else record


def _season_drain_wait(*, season: Season, timeout_seconds: float) -> str:
    """Wait until the consumer drained the topic up to the recorded end offsets; "" once it
    has, else (at the timeout, or when Kafka cannot tell) what still lags, for humans."""
    group = settings.KAFKA_CONSUMER_GROUP
    deadline = time.monotonic() + max(0.0, timeout_seconds)
    try:
        record = _season_drain_end_offsets(season=season)
        topic = str(record["topic"])
        raw_ends = record["partitions"]
        assert isinstance(raw_ends, dict)
        ends = {int(p): int(offset) for p, offset in raw_ends.items()}
        with kafka_offsets_reader(group_id=group) as reader:
            while True:
                lag = consumer_group_lag_get(reader=reader, topic=topic, end_offsets=ends)
                if not lag:
                    return ""
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return (
                        f"consumer group {group} has not drained topic {topic} up to the end "
                        f"offsets recorded at {record['recorded_at']} within "
                        f"{timeout_seconds:g} s; lagging: "
                        + ", ".join(partition.describe() for partition in lag)
                    )
                time.sleep(min(_DRAIN_POLL_SECONDS, remaining))
    except KafkaError as exc:
        return f"Kafka cannot tell whether the consumer drained the results ({exc!r})"


def final_standings_replace(*, season: Season, rows: Sequence[StandingRow]) -> None:
    """Replace the season's final standings by ``rows``; runs in the caller's transaction."""
    FinalStanding.objects.filter(season=season).delete()
    FinalStanding.objects.bulk_create(
        FinalStanding(
            season=season,
            rank=row.rank,
            player_id=row.player_id,
            points=row.points,
            reached_at=row.reached_at,
        )
        for row in rows
    )


@transaction.atomic
def _season_finalize(*, season_id: int, now: datetime) -> tuple[int | None, int] | None:
    """(standings, grants created); (None, 0) when no longer closing; None when locked."""
    season = (
        Season.objects.select_for_update(no_key=True, skip_locked=True).filter(id=season_id).first()
    )
    if season is None:
        return None
    if season.status != SeasonStatus.CLOSING:
        return None, 0
    rows = season_standings_compute(season=season, limit=settings.FINAL_STANDINGS_SIZE)
    final_standings_replace(season=season, rows=rows)
    already_granted = set(
        RewardGrant.objects.filter(season=season).values_list("player_id", flat=True)
    )
    grants = [
        RewardGrant(
            season=season,
            tier=tier,
            player_id=row.player_id,
            rank=row.rank,
            reward_name=tier.reward_name,
            quantity=tier.quantity,
        )
        for tier in RewardTier.objects.filter(season=season).order_by("rank_from")
        for row in rows[tier.rank_from - 1 : tier.rank_to]
        if row.player_id not in already_granted
    ]
    RewardGrant.objects.bulk_create(grants)
    season.status = SeasonStatus.CLOSED
    season.closed_at = now
    season.save(update_fields=["status", "closed_at", "updated_at"])
    return len(rows), len(grants)


def season_keys_unlink(*, season_id: int) -> int:
    """UNLINK (free memory off the main thread) every Redis key of the season; returns how many."""
    client = get_board_redis()
    unlinked = 0
    batch: list[bytes] = []
    for key in client.scan_iter(match=keys.season_pattern(season_id=season_id), count=1000):
        batch.append(key)
        if len(batch) >= 500:
            unlinked += int(client.unlink(*batch))
            batch.clear()
    if batch:
        unlinked += int(client.unlink(*batch))
    return unlinked
