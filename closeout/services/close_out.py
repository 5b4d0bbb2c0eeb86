"""The close-out of a season: drain, final standings, grants, then its Redis keys dropped."""

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

from leaderboard.services import season_keys_unlink
from seasons.models import Season, SeasonStatus

from ..models import FinalStanding, RewardGrant, RewardTier
from ..selectors import (
    StandingRow,
    consumer_group_lag_get,
    kafka_offsets_reader,
    season_standings_compute,
    topic_end_offsets_get,
)

logger = logging.getLogger(__name__)


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
