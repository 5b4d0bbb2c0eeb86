"""Reads on seasons.

The read API resolves a season on every request; ``season_get_cached`` keeps a short-lived
per-process memo so the hot endpoints make no SQL query once a season is known. Its dates and
status only matter to the read path at the scale of the memo's few seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import QuerySet
from django.utils import timezone

from .cron import cron_next
from .memo import ProcessMemo, process_memo
from .models import Schedule, Season, SeasonStatus


@dataclass(frozen=True, slots=True)
class SeasonRef:
    """What the read path needs of a season, detached from the ORM."""

    id: int
    name: str
    status: str
    starts_at: datetime
    ends_at: datetime
    # The schedule that started it (slug and name) and its occurrence; None for a hand-made one.
    schedule_slug: str | None = None
    schedule_name: str | None = None
    occurrence: int | None = None

    @classmethod
    def from_model(cls, season: Season) -> SeasonRef:
        """``season``, naming its schedule only when loaded with it (select_related): no query
        per season here (boards are built from this on the ingestion path)."""
        loaded = Season.schedule.field.is_cached(season)
        schedule = season.schedule if loaded and season.schedule_id is not None else None
        return cls(
            id=season.id,
            name=season.name,
            status=season.status,
            starts_at=season.starts_at,
            ends_at=season.ends_at,
            schedule_slug=schedule.slug if schedule is not None else None,
            schedule_name=schedule.name if schedule is not None else None,
            occurrence=season.occurrence,
        )


_seasons: ProcessMemo[int, SeasonRef | None] = process_memo(
    ttl_setting="LEADERBOARD_SEASON_CACHE_SECONDS",
    fallback_setting="LEADERBOARD_SEASON_FALLBACK_SECONDS",
)


def season_get_cached(*, season_id: int) -> SeasonRef | None:
    """The season, or None if it does not exist; memoized for LEADERBOARD_SEASON_CACHE_SECONDS."""

    def load() -> SeasonRef | None:
        season = Season.objects.select_related("schedule").filter(id=season_id).first()
        return SeasonRef.from_model(season) if season is not None else None

    return _seasons.get(season_id, load)


def season_list() -> QuerySet[Season]:
    """Every season, the most recent start first."""
    return Season.objects.select_related("schedule").order_by("-starts_at", "-id")


def seasons_closing_since(*, before: datetime) -> list[int]:
    """The closing seasons that stopped taking results at or before ``before`` (their close-out
    is due once the consumer's drain grace has passed), by id."""
    return list(
        Season.objects.filter(status=SeasonStatus.CLOSING, closing_since__lte=before)
        .order_by("id")
        .values_list("id", flat=True)
    )


def seasons_keys_unreleased(*, closed_before: datetime) -> list[int]:
    """The seasons closed at or before ``closed_before`` whose Redis keys were never unlinked
    (a close-out stopped between its commit and the unlink), by id."""
    return list(
        Season.objects.filter(
            status=SeasonStatus.CLOSED, closed_at__lte=closed_before, keys_released_at=None
        )
        .order_by("id")
        .values_list("id", flat=True)
    )


def season_list_active(*, include_closing: bool = False) -> list[Season]:
    """Seasons taking results now (status kept in step with the dates by season_statuses_sync).

    ``include_closing`` adds the seasons that stopped taking results but whose close-out has not
    finished: their boards still change while the consumer drains.
    """
    statuses = [SeasonStatus.ACTIVE]
    if include_closing:
        statuses.append(SeasonStatus.CLOSING)
    return list(Season.objects.filter(status__in=statuses).order_by("id"))


# --- Schedules ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScheduleView:
    """A schedule as the API and pages show it."""

    slug: str
    name: str
    cron: str
    timezone: str
    active: bool
    # The schedule's season running now (by its dates), if any.
    current_season_id: int | None
    # When the current season ends and the next begins: what games show as a countdown. The
    # current season's end; with none running, the next occurrence (null when paused).
    next_reset_at: datetime | None
    last_occurrence: int
    # A tiered league: its tiers (lowest first) and the percent of each cohort moving up and
    # down at each close-out; () and zeros for a schedule without one.
    tiers: tuple[str, ...] = ()
    promote_percent: int = 0
    relegate_percent: int = 0


def schedule_resumes_after(*, schedule: Schedule) -> datetime:
    """The schedule's next occurrence is its cron's first tick strictly after this.

    After the last occurrence's start, as the cron ran it; but when that occurrence's season
    exists, no earlier than just before its end: staff may have changed the cron or the time
    zone since, and the new one's ticks after the old start fall inside that season (a weekly
    UTC schedule moved to New York began a second week-long season five hours into the first).
    Unchanged, the season ends on the next tick, so both give the same occurrence."""
    after = schedule.last_occurrence_at or schedule.starts_from
    if schedule.last_occurrence:
        last_end = (
            Season.objects.filter(schedule_id=schedule.pk, occurrence=schedule.last_occurrence)
            .values_list("ends_at", flat=True)
            .first()
        )
        if last_end is not None:
            # One second before: a tick exactly at the end is the next start (5-field crons
            # tick on whole minutes).
            after = max(after, last_end - timedelta(seconds=1))
    return after


def schedule_next_occurrences(*, schedule: Schedule, after: datetime, count: int) -> list[datetime]:
    """The next ``count`` occurrences after ``after`` that the schedule would create (never one
    inside the season it created last)."""
    after = max(after, schedule_resumes_after(schedule=schedule))
    return cron_next(expression=schedule.cron, zone=schedule.timezone, after=after, count=count)


def schedule_view(*, schedule: Schedule, now: datetime | None = None) -> ScheduleView:
    now = now or timezone.now()
    current = (
        Season.objects.filter(schedule=schedule, starts_at__lte=now, ends_at__gt=now)
        .exclude(status=SeasonStatus.CLOSED)
        .order_by("-starts_at")
        .first()
    )
    # With none running, the next to begin: one created ahead of its start (the schedule's
    # lead) begins before the cron's next tick, which is its end.
    upcoming = (
        None
        if current is not None
        else Season.objects.filter(schedule=schedule, starts_at__gt=now)
        .exclude(status=SeasonStatus.CLOSED)
        .order_by("starts_at")
        .values_list("starts_at", flat=True)
        .first()
    )
    if current is not None:
        next_reset: datetime | None = current.ends_at
    elif upcoming is not None:
        next_reset = upcoming
    elif schedule.active:
        next_reset = schedule_next_occurrences(schedule=schedule, after=now, count=1)[0]
    else:
        next_reset = None
    return ScheduleView(
        slug=schedule.slug,
        name=schedule.name,
        cron=schedule.cron,
        timezone=schedule.timezone,
        active=schedule.active,
        current_season_id=current.id if current is not None else None,
        next_reset_at=next_reset,
        last_occurrence=schedule.last_occurrence,
        tiers=tuple(schedule.tiers),
        promote_percent=schedule.promote_percent,
        relegate_percent=schedule.relegate_percent,
    )


def schedule_list(*, now: datetime | None = None) -> list[ScheduleView]:
    """Every schedule, by slug."""
    now = now or timezone.now()
    return [schedule_view(schedule=s, now=now) for s in Schedule.objects.order_by("slug")]


def schedule_get(*, slug: str) -> Schedule | None:
    return Schedule.objects.filter(slug=slug).first()


def schedule_seasons(*, schedule: Schedule, limit: int) -> list[Season]:
    """The schedule's seasons, the newest occurrence first."""
    return list(Season.objects.filter(schedule=schedule).order_by("-occurrence")[:limit])


class UnknownSchedule(Exception):
    """A filter names a schedule that does not exist."""


def schedule_require(*, slug: str) -> None:
    """UnknownSchedule unless a schedule ``slug`` exists: a filter by an unknown schedule is a
    mistake to report, not an empty answer."""
    if not Schedule.objects.filter(slug=slug).exists():
        raise UnknownSchedule(f"schedule {slug[:40]!r} does not exist")
