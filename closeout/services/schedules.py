"""Competitions that recur: a schedule's seasons, created ahead of each cron occurrence.

A schedule (seasons.models.Schedule) names a template season. Each occurrence of its cron
starts a season that ends at the next occurrence, with a copy of the template's boards and
reward tiers, created ``lead_minutes`` before it starts; the close-out closes it like any
season (closeout/tasks.py). This module lives with the close-out because the reward tiers it
copies do.

Exactly once, whoever runs it: ``schedules_advance`` handles each schedule in one transaction
that holds the schedule's row lock (a second beat waits, then finds the work done), creates an
occurrence's season, boards and tiers together (a crash leaves all or nothing), and records
how far it got in the same transaction. The unique (schedule, occurrence) constraint on
seasons backs the lock.

An occurrence whose whole season passed before any run reached it (beat was down) is skipped,
not created: results sent for it found no season and went to the dead-letter topic as
``unknown_season``, so it could hold nothing, and an empty closed season in the archive would
tell players a competition ran that no one could play. Its number is used up all the same, so
occurrence numbers stay the count of cron ticks since the schedule began.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.core.exceptions import ValidationError
from django.db import IntegrityError, InterfaceError, OperationalError, transaction
from django.db.models import Max
from django.utils import timezone

from leaderboard.models import Board
from leaderboard.services import board_create, league_boards_open
from seasons.cron import CronError, cron_check, cron_ticks, timezone_check
from seasons.leagues import NO_LEAGUE, LeagueSpec, league_spec_check
from seasons.models import Schedule, Season, SeasonStatus
from seasons.selectors import schedule_resumes_after

from ..models import RewardTier

logger = logging.getLogger(__name__)

# At most this many occurrences handled per schedule and run (a minutely cron after a long
# outage): the next run goes on from where this one stopped.
MAX_OCCURRENCES_PER_RUN = 1_000
# Lead times beyond a week would create a season's boards long before anyone can see them.
MAX_LEAD_MINUTES = 7 * 24 * 60


@dataclass(frozen=True, slots=True)
class ScheduleAdvanced:
    """What one run did for one schedule."""

    schedule: str  # slug
    created: tuple[int, ...] = ()  # season ids, oldest occurrence first
    skipped: tuple[int, ...] = ()  # occurrence numbers
    error: str = ""  # why this schedule could not advance (the others still did)


@dataclass(frozen=True, slots=True)
class SchedulesAdvanced:
    schedules: tuple[ScheduleAdvanced, ...] = field(default_factory=tuple)

    @property
    def created(self) -> tuple[int, ...]:
        return tuple(s for one in self.schedules for s in one.created)


def schedule_create(
    *,
    slug: str,
    name: str,
    cron: str,
    template_season_id: int,
    timezone_name: str = "UTC",
    lead_minutes: int = 60,
    starts_from: datetime | None = None,
    tiers: Sequence[str] = (),
    promote_percent: int = 0,
    relegate_percent: int = 0,
) -> Schedule:
    """A new schedule; its first occurrence is the first tick after ``starts_from`` (now).

    With ``tiers`` (lowest first) it is a tiered league: each of its seasons' boards with
    cohorts is a league board, and each close-out moves ``promote_percent`` of every cohort up
    one tier and ``relegate_percent`` down one for the next season (docs/leagues.md)."""
    template = Season.objects.filter(id=template_season_id).first()
    if template is None:
        raise ValidationError(f"template season {template_season_id} does not exist")
    if not Board.objects.filter(season_id=template.id).exists():
        raise ValidationError(f"template season {template.id} has no board to copy")
    league = schedule_league_check(
        template_season_id=template.id,
        tiers=tiers,
        promote_percent=promote_percent,
        relegate_percent=relegate_percent,
    )
    if not 0 <= lead_minutes <= MAX_LEAD_MINUTES:
        raise ValidationError(f"lead minutes must be within 0..{MAX_LEAD_MINUTES}")
    try:
        cron = cron_check(cron)
        timezone_check(timezone_name)
    except CronError as exc:
        raise ValidationError(str(exc)) from exc
    if Schedule.objects.filter(slug=slug).exists():
        raise ValidationError(f"a schedule {slug!r} already exists")
    schedule = Schedule(
        slug=slug,
        name=name,
        cron=cron,
        timezone=timezone_name,
        template_season=template,
        lead_minutes=lead_minutes,
        starts_from=starts_from or timezone.now(),
        tiers=list(league.tiers),
        promote_percent=league.promote_percent,
        relegate_percent=league.relegate_percent,
    )
    schedule.full_clean()
    schedule.save(force_insert=True)
    logger.info(
        "schedule %s created (%s, %s)%s",
        slug,
        cron,
        timezone_name,
        f", a league of tiers {', '.join(league.tiers)}" if league.is_league else "",
    )
    return schedule


def schedule_league_check(
    *, template_season_id: int, tiers: Sequence[str], promote_percent: int, relegate_percent: int
) -> LeagueSpec:
    """The league a schedule of this template may run, checked: a league needs a template board
    with cohorts (its league boards), and the template's reward tiers may name only its tiers."""
    league = league_spec_check(
        tiers=tiers, promote_percent=promote_percent, relegate_percent=relegate_percent
    )
    sizes = [
        size
        for size in Board.objects.filter(season_id=template_season_id).values_list(
            "cohort_size", flat=True
        )
        if size is not None
    ]
    if league.is_league and not sizes:
        raise ValidationError(
            f"template season {template_season_id} has no board with cohorts: a league ranks "
            "its players in cohorts (create_board --cohort-size)"
        )
    if league.is_league:
        # Movers per cohort are floor(players x percent / 100): a percent that moves nobody
        # from a full cohort makes a ladder nobody ever climbs or leaves, without a word.
        for name, percent in (("promote", promote_percent), ("relegate", relegate_percent)):
            small = [size for size in sizes if percent and size * percent // 100 == 0]
            if small:
                raise ValidationError(
                    f"--{name} {percent}% of a cohort of {min(small)} moves nobody (the movers "
                    f"are rounded down): at least {-(-100 // min(small))}% moves one"
                )
    named = set(
        RewardTier.objects.filter(season_id=template_season_id)
        .exclude(league_tier="")
        .values_list("league_tier", flat=True)
    )
    unknown = sorted(named - set(league.tiers))
    if unknown:
        raise ValidationError(
            f"the template's reward tiers name league tier(s) {', '.join(unknown)}, not among "
            f"the schedule's tiers ({', '.join(league.tiers) or 'none'})"
        )
    return league


def schedule_league_set(
    *, schedule_id: int, tiers: Sequence[str], promote_percent: int, relegate_percent: int
) -> Schedule:
    """Change a schedule's league (its tiers, promotion and relegation): for the seasons it
    creates from now on; each season keeps the league it was created with."""
    with transaction.atomic():
        schedule = Schedule.objects.select_for_update().get(pk=schedule_id)
        league = schedule_league_check(
            template_season_id=schedule.template_season_id,
            tiers=tiers,
            promote_percent=promote_percent,
            relegate_percent=relegate_percent,
        )
        schedule.tiers = list(league.tiers)
        schedule.promote_percent = league.promote_percent
        schedule.relegate_percent = league.relegate_percent
        schedule.save(update_fields=["tiers", "promote_percent", "relegate_percent", "updated_at"])
    logger.info("schedule %s: league set to %s", schedule.slug, league)
    return schedule


def schedule_set_active(*, schedule_id: int, active: bool) -> Schedule:
    """Pause or resume. A resumed schedule skips the occurrences it missed while paused whose
    seasons are over, as after an outage."""
    with transaction.atomic():
        schedule = Schedule.objects.select_for_update().get(pk=schedule_id)
        if schedule.active != active:
            schedule.active = active
            schedule.save(update_fields=["active", "updated_at"])
            logger.info("schedule %s %s", schedule.slug, "resumed" if active else "paused")
    return schedule


def schedules_advance(*, now: datetime | None = None) -> SchedulesAdvanced:
    """Create every season due by now on every active schedule (the periodic task)."""
    now = now or timezone.now()
    found = Schedule.objects.filter(active=True).order_by("id").values_list("id", "slug")
    done: list[ScheduleAdvanced] = []
    for schedule_id, slug in found:
        try:
            done.append(schedule_advance(schedule_id=schedule_id, now=now))
        except (OperationalError, InterfaceError):
            raise  # PostgreSQL away: the task retries the whole run
        except Exception as exc:
            # One schedule that cannot advance (a time zone the server's tzdata no longer has,
            # a bug) is logged and left where it stopped; the others still advance.
            logger.exception("schedule %s: could not advance", slug)
            done.append(ScheduleAdvanced(slug, error=f"{type(exc).__name__}: {exc}"))
    return SchedulesAdvanced(tuple(done))


def schedule_advance(*, schedule_id: int, now: datetime | None = None) -> ScheduleAdvanced:
    """Create the seasons of one schedule due by ``now``; skip the occurrences already over."""
    now = now or timezone.now()
    with transaction.atomic():
        schedule = (
            Schedule.objects.select_for_update()
            .select_related("template_season")
            .get(pk=schedule_id)
        )
        if not schedule.active:
            return ScheduleAdvanced(schedule.slug)
        lead = timedelta(minutes=schedule.lead_minutes)
        ticks = cron_ticks(
            expression=schedule.cron,
            zone=schedule.timezone,
            after=schedule_resumes_after(schedule=schedule),
        )
        created: list[int] = []
        skipped: list[int] = []
        number = schedule.last_occurrence
        start = next(ticks)
        try:
            for _ in range(MAX_OCCURRENCES_PER_RUN):
                if start - lead > now:
                    break
                end = next(ticks)
                number += 1
                if end <= now:
                    skipped.append(number)
                else:
                    created.append(
                        _occurrence_create(
                            schedule=schedule, number=number, start=start, end=end, now=now
                        )
                    )
                schedule.last_occurrence, schedule.last_occurrence_at = number, start
                start = end
        except ValidationError as exc:
            # The template cannot be copied to this window (a board's codec, a tier): nothing of
            # this run is kept, and the schedule waits for staff where it stopped.
            transaction.set_rollback(True)
            reason = "; ".join(exc.messages)
            logger.error(
                "schedule %s: occurrence %d could not be created: %s", schedule.slug, number, reason
            )
            return ScheduleAdvanced(schedule.slug, error=reason)
        if created or skipped:
            schedule.occurrences_skipped += len(skipped)
            schedule.save(
                update_fields=[
                    "last_occurrence",
                    "last_occurrence_at",
                    "occurrences_skipped",
                    "updated_at",
                ]
            )
    if skipped:
        logger.warning(
            "schedule %s: skipped occurrences %s, whose seasons ended before they were reached",
            schedule.slug,
            ", ".join(map(str, skipped)),
        )
    if created:
        logger.info("schedule %s: created seasons %s", schedule.slug, created)
        # A league board created waiting, whose previous season closed while this transaction
        # ran, is not waited on by that close-out (it could not see the board): opened here.
        if schedule.tiers:
            league_boards_open()
    return ScheduleAdvanced(schedule.slug, tuple(created), tuple(skipped))


def _occurrence_create(
    *, schedule: Schedule, number: int, start: datetime, end: datetime, now: datetime
) -> int:
    """The occurrence's season with a copy of the template's boards and reward tiers."""
    template = schedule.template_season
    league = league_spec_check(
        tiers=schedule.tiers,
        promote_percent=schedule.promote_percent,
        relegate_percent=schedule.relegate_percent,
    )
    season = _season_insert(
        schedule=schedule,
        number=number,
        name=f"{schedule.name} #{number}",
        start=start,
        end=end,
        now=now,
    )
    boards: dict[str, Board] = {}
    for board in Board.objects.filter(season_id=template.id).order_by("id"):
        boards[board.slug] = board_create(
            season_id=season.id,
            slug=board.slug,
            name=board.name,
            order=board.order,
            rule=board.rule,
            time_resolution_seconds=board.time_resolution_seconds,
            keeps_metadata=board.keeps_metadata,
            tiebreaks=board.tiebreaks,
            cohort_size=board.cohort_size,
            rank_events=board.rank_events,
            event_top_n=board.event_top_n,
            join_required=board.join_required,
            max_size=board.max_size,
            max_attempts=board.max_attempts,
            # Its boards with cohorts are the league's boards (docs/leagues.md).
            league=league if board.cohort_size is not None else NO_LEAGUE,
        )
    tiers = [
        RewardTier(
            season=season,
            board=boards[tier.board.slug],
            rank_from=tier.rank_from,
            rank_to=tier.rank_to,
            reward_name=tier.reward_name,
            quantity=tier.quantity,
            league_tier=tier.league_tier,
        )
        for tier in RewardTier.objects.filter(season_id=template.id).select_related("board")
    ]
    for tier in tiers:
        if tier.league_tier and tier.league_tier not in tier.board.tiers:
            raise ValidationError(
                f"reward tier {tier.rank_from}-{tier.rank_to} ({tier.reward_name}) of board "
                f"{tier.board.slug!r} names league tier {tier.league_tier!r}, which the "
                f"schedule's league ({', '.join(league.tiers) or 'none'}) does not have"
            )
    RewardTier.objects.bulk_create(tiers)
    return season.id


def _season_insert(
    *, schedule: Schedule, number: int, name: str, start: datetime, end: datetime, now: datetime
) -> Season:
    """A new season with the next free id. Staff may create a season by hand at the same moment
    and take that id: the insert then tries the next one."""
    for _ in range(5):
        season_id = (Season.objects.aggregate(top=Max("id"))["top"] or 0) + 1
        season = Season(
            id=season_id,
            name=name[:200],
            starts_at=start,
            ends_at=end,
            schedule=schedule,
            occurrence=number,
            # Created late (after an outage), it takes results at once rather than at the next
            # status sync.
            status=SeasonStatus.ACTIVE if start <= now else SeasonStatus.SCHEDULED,
        )
        season.full_clean(validate_unique=False, validate_constraints=False)
        try:
            with transaction.atomic():
                season.save(force_insert=True)
        except IntegrityError:
            if Season.objects.filter(schedule=schedule, occurrence=number).exists():
                raise  # not an id race: the schedule's lock was bypassed
            continue
        return season
    raise ValidationError(f"no free season id for occurrence {number} after 5 tries")
