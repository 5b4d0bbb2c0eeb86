"""Schedules: each cron occurrence's season, created ahead, exactly once (closeout/services/
schedules.py), against the real PostgreSQL."""

from __future__ import annotations

import itertools
import threading
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from django.contrib import admin as django_admin
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from closeout.admin import ScheduleAdmin, ScheduleForm
from closeout.models import RewardTier
from closeout.services import (
    ScheduleAdvanced,
    reward_tier_create,
    schedule_advance,
    schedule_create,
    schedule_set_active,
    schedules_advance,
)
from closeout.services import schedules as schedules_module
from leaderboard.models import Board, BoardOrder, ScoringRule, TiebreakColumn
from seasons.models import Schedule, Season, SeasonStatus
from tests.factories import SeasonFactory, board_factory

T0 = datetime(2027, 1, 4, tzinfo=UTC)  # a Monday


@pytest.fixture
def template() -> Season:
    """A template with four boards (one with tie-break columns, one keeping metadata, one a
    tournament) and reward tiers on two of them."""
    season = SeasonFactory.create(starts_at=T0 - timedelta(days=30), ends_at=T0 - timedelta(days=1))
    board_factory(season, "laps", order=BoardOrder.ASC, keeps_metadata=True)
    board_factory(
        season,
        "arena",
        rule=ScoringRule.CUMULATIVE,
        tiebreaks=[TiebreakColumn("kills", "desc"), TiebreakColumn("deaths", "asc")],
    )
    board_factory(season, "cup", join_required=True, max_size=32, max_attempts=3)
    reward_tier_create(season_id=season.id, rank_from=1, rank_to=1, reward_name="crown")
    reward_tier_create(season_id=season.id, rank_from=2, rank_to=10, reward_name="gems", quantity=5)
    reward_tier_create(
        season_id=season.id, rank_from=1, rank_to=3, reward_name="trophy", board_slug="laps"
    )
    return season


def make_schedule(template: Season, **kwargs: object) -> Schedule:
    options: dict[str, object] = {
        "slug": "weekly-cup",
        "name": "Weekly cup",
        "cron": "0 0 * * 1",
        "template_season_id": template.id,
        "lead_minutes": 60,
        "starts_from": T0 - timedelta(minutes=1),
    }
    options.update(kwargs)
    return schedule_create(**options)  # type: ignore[arg-type]


def seasons_of(schedule: Schedule) -> list[tuple[int | None, datetime, datetime]]:
    return [
        (s.occurrence, s.starts_at, s.ends_at)
        for s in Season.objects.filter(schedule=schedule).order_by("occurrence")
    ]


def board_specs(season: Season) -> list[tuple]:
    return [
        (
            b.slug,
            b.name,
            b.order,
            b.rule,
            b.time_resolution_seconds,
            b.keeps_metadata,
            b.tiebreaks,
            (b.join_required, b.max_size, b.max_attempts),
        )
        for b in Board.objects.filter(season=season).order_by("slug")
    ]


def tier_specs(season: Season) -> list[tuple]:
    return sorted(
        (t.board.slug, t.rank_from, t.rank_to, t.reward_name, t.quantity)
        for t in RewardTier.objects.filter(season=season).select_related("board")
    )


@pytest.mark.django_db
def test_each_occurrence_is_created_lead_minutes_ahead_with_the_templates_boards_and_tiers(
    template: Season,
) -> None:
    schedule = make_schedule(template)
    # More than the lead before the first occurrence: nothing yet.
    assert schedule_advance(schedule_id=schedule.id, now=T0 - timedelta(minutes=61)).created == ()
    assert seasons_of(schedule) == []

    done = schedule_advance(schedule_id=schedule.id, now=T0 - timedelta(minutes=60))
    assert len(done.created) == 1
    season = Season.objects.get(id=done.created[0])
    assert (season.schedule_id, season.occurrence, season.name) == (schedule.id, 1, "Weekly cup #1")
    assert (season.starts_at, season.ends_at) == (T0, T0 + timedelta(days=7))
    assert season.status == SeasonStatus.SCHEDULED
    assert board_specs(season) == board_specs(template)
    assert tier_specs(season) == tier_specs(template)
    # The copies' tiers point at the new season's boards, not the template's.
    assert set(
        RewardTier.objects.filter(season=season).values_list("board__season", flat=True)
    ) == {season.id}

    # Again, and again later within the same occurrence: nothing more.
    assert schedule_advance(schedule_id=schedule.id, now=T0 - timedelta(minutes=59)).created == ()
    assert schedule_advance(schedule_id=schedule.id, now=T0 + timedelta(days=1)).created == ()
    # The next one, an hour before the next Monday.
    nxt = schedule_advance(schedule_id=schedule.id, now=T0 + timedelta(days=7, minutes=-60))
    assert len(nxt.created) == 1
    assert seasons_of(schedule) == [
        (1, T0, T0 + timedelta(days=7)),
        (2, T0 + timedelta(days=7), T0 + timedelta(days=14)),
    ]
    schedule.refresh_from_db()
    assert (schedule.last_occurrence, schedule.last_occurrence_at) == (2, T0 + timedelta(days=7))


@pytest.mark.django_db
def test_a_season_created_after_its_start_takes_results_at_once(template: Season) -> None:
    schedule = make_schedule(template)
    done = schedule_advance(schedule_id=schedule.id, now=T0 + timedelta(hours=5))
    assert Season.objects.get(id=done.created[0]).status == SeasonStatus.ACTIVE


@pytest.mark.django_db
def test_month_ends_follow_the_cron(template: Season) -> None:
    # The 31st: only months that have one. Each season runs to the next such day.
    schedule = make_schedule(
        template, slug="monthly", cron="0 12 31 * *", starts_from=datetime(2027, 1, 1, tzinfo=UTC)
    )
    for month in range(1, 13):
        schedule_advance(schedule_id=schedule.id, now=datetime(2027, month, 28, tzinfo=UTC))
    starts = [start for _, start, _ in seasons_of(schedule)]
    assert [(d.month, d.day) for d in starts] == [
        (1, 31), (3, 31), (5, 31), (7, 31), (8, 31), (10, 31),
    ]  # fmt: skip
    ends = [end for _, _, end in seasons_of(schedule)]
    assert ends == [*starts[1:], datetime(2027, 12, 31, 12, tzinfo=UTC)]
    # And the first of every month: February is 28 days long.
    first = make_schedule(
        template, slug="first", cron="0 0 1 * *", starts_from=datetime(2027, 1, 15, tzinfo=UTC)
    )
    schedule_advance(schedule_id=first.id, now=datetime(2027, 2, 1, tzinfo=UTC))
    schedule_advance(schedule_id=first.id, now=datetime(2027, 3, 1, tzinfo=UTC))
    assert [(end - start).days for _, start, end in seasons_of(first)] == [28, 31]


def croniter_ticks(cron: str, zone: str, after: datetime, count: int) -> list[datetime]:
    it = croniter(cron, after.astimezone(ZoneInfo(zone)))
    return [it.get_next(datetime).astimezone(UTC) for _ in range(count)]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("cron", "after", "lengths"),
    [
        # Midnight in Paris: the night the clocks go forward is 23 hours long, back 25.
        ("0 0 * * *", datetime(2027, 3, 26, 12, tzinfo=UTC), [24, 23, 24]),
        ("0 0 * * *", datetime(2027, 10, 29, 12, tzinfo=UTC), [24, 25, 24]),
        # 02:30 does not exist on 2027-03-28: croniter fires at 03:00 instead.
        ("30 2 * * *", datetime(2027, 3, 26, 12, tzinfo=UTC), [23.5, 23.5, 24]),
        # 02:30 happens twice on 2027-10-31: croniter fires at both, a one-hour season.
        ("30 2 * * *", datetime(2027, 10, 29, 12, tzinfo=UTC), [24, 1, 24]),
    ],
)
def test_a_dst_change_behaves_as_croniter_defines(
    template: Season, cron: str, after: datetime, lengths: list[float]
) -> None:
    schedule = make_schedule(
        template, slug="daily", cron=cron, timezone_name="Europe/Paris", starts_from=after
    )
    ticks = croniter_ticks(cron, "Europe/Paris", after, 4)
    for tick in ticks[:3]:
        schedule_advance(schedule_id=schedule.id, now=tick - timedelta(minutes=60))
    made = seasons_of(schedule)
    assert [(start, end) for _, start, end in made] == list(itertools.pairwise(ticks))
    assert [(end - start).total_seconds() / 3600 for _, start, end in made] == lengths


@pytest.mark.django_db
def test_a_beat_down_for_three_occurrences_skips_them_and_creates_the_current_one(
    template: Season, caplog: pytest.LogCaptureFixture
) -> None:
    schedule = make_schedule(template, cron="0 * * * *", lead_minutes=10)
    schedule_advance(schedule_id=schedule.id, now=T0)  # occurrence 1 (T0 .. T0+1h)
    # Down from T0 to T0+4h30: occurrences 2, 3 and 4 ended unseen; 5 runs now; 6 is not due.
    with caplog.at_level("WARNING"):
        done = schedule_advance(schedule_id=schedule.id, now=T0 + timedelta(hours=4, minutes=30))
    assert done.skipped == (2, 3, 4)
    assert [o for o, _, _ in seasons_of(schedule)] == [1, 5]
    current = Season.objects.get(id=done.created[0])
    assert (current.starts_at, current.status) == (T0 + timedelta(hours=4), SeasonStatus.ACTIVE)
    schedule.refresh_from_db()
    assert (schedule.last_occurrence, schedule.occurrences_skipped) == (5, 3)
    assert "skipped occurrences 2, 3, 4" in caplog.text
    # Ten minutes before 6: created, numbered on.
    after = schedule_advance(schedule_id=schedule.id, now=T0 + timedelta(hours=4, minutes=50))
    assert Season.objects.get(id=after.created[0]).occurrence == 6


@pytest.mark.django_db
def test_a_crash_between_the_season_and_its_boards_leaves_nothing_and_the_next_run_creates_it(
    template: Season, monkeypatch: pytest.MonkeyPatch
) -> None:
    schedule = make_schedule(template)
    real = schedules_module.board_create
    calls = []

    def crash_on_the_second_board(**kwargs: object) -> Board:
        calls.append(kwargs["slug"])
        if len(calls) == 2:
            raise RuntimeError("the process died here")
        return real(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(schedules_module, "board_create", crash_on_the_second_board)
    with pytest.raises(RuntimeError):
        schedule_advance(schedule_id=schedule.id, now=T0)
    assert len(calls) == 2
    assert seasons_of(schedule) == []
    schedule.refresh_from_db()
    assert (schedule.last_occurrence, schedule.last_occurrence_at) == (0, None)

    monkeypatch.setattr(schedules_module, "board_create", real)
    done = schedule_advance(schedule_id=schedule.id, now=T0)
    assert board_specs(Season.objects.get(id=done.created[0])) == board_specs(template)


@pytest.mark.django_db
def test_a_template_that_cannot_be_copied_stops_that_schedule_only(
    template: Season, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = make_schedule(template)
    make_schedule(template, slug="daily", cron="0 0 * * *")
    real = schedules_module.board_create

    def refuse_for_broken(**kwargs: Any) -> Board:
        season = Season.objects.get(id=kwargs["season_id"])
        if season.schedule_id == broken.id:
            raise ValidationError("the codec cannot hold this window")
        return real(**kwargs)

    monkeypatch.setattr(schedules_module, "board_create", refuse_for_broken)
    result = schedules_advance(now=T0)
    by_slug = {one.schedule: one for one in result.schedules}
    assert by_slug["weekly-cup"].error == "the codec cannot hold this window"
    assert by_slug["weekly-cup"].created == ()
    assert seasons_of(broken) == []
    assert len(by_slug["daily"].created) == 1


@pytest.mark.django_db
def test_a_schedule_that_fails_otherwise_does_not_hold_the_others(template: Season) -> None:
    # A time zone the server's zone database no longer has (stored when it had it).
    broken = make_schedule(template)
    make_schedule(template, slug="daily", cron="0 0 * * *")
    Schedule.objects.filter(id=broken.id).update(timezone="Mars/Olympus")
    result = schedules_advance(now=T0)
    by_slug = {one.schedule: one for one in result.schedules}
    assert by_slug["weekly-cup"].error.startswith("CronError: unknown time zone 'Mars/Olympus'")
    assert seasons_of(broken) == []
    assert len(by_slug["daily"].created) == 1


@pytest.mark.django_db
def test_a_paused_schedule_creates_nothing_and_a_resumed_one_skips_what_passed(
    template: Season,
) -> None:
    schedule = make_schedule(template, cron="0 * * * *", lead_minutes=0)
    schedule_set_active(schedule_id=schedule.id, active=False)
    assert schedules_advance(now=T0 + timedelta(hours=3, minutes=5)).created == ()
    schedule_set_active(schedule_id=schedule.id, active=True)
    done = schedule_advance(schedule_id=schedule.id, now=T0 + timedelta(hours=3, minutes=5))
    assert done.skipped == (1, 2, 3)
    assert [o for o, _, _ in seasons_of(schedule)] == [4]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("cron", "zone", "next_window"),
    [
        # Only the zone changed: New York's Monday midnight, not five hours into the week.
        ("0 0 * * 1", "America/New_York", (T0 + timedelta(days=7, hours=5), 7)),
        # Paris's Monday midnight is an hour before the running week ends: the one after.
        ("0 0 * * 1", "Europe/Paris", (T0 + timedelta(days=13, hours=23), 7)),
        # Daily from now on: the first day after the running week, not a day inside it.
        ("0 0 * * *", "UTC", (T0 + timedelta(days=7), 1)),
    ],
)
def test_a_cron_or_zone_changed_meanwhile_never_starts_a_season_inside_the_last_one(
    template: Season, cron: str, zone: str, next_window: tuple[datetime, int]
) -> None:
    schedule = make_schedule(template)
    schedule_advance(schedule_id=schedule.id, now=T0 - timedelta(minutes=30))
    assert seasons_of(schedule) == [(1, T0, T0 + timedelta(days=7))]
    Schedule.objects.filter(pk=schedule.pk).update(cron=cron, timezone=zone)  # as the admin does
    start, days = next_window
    schedule_advance(schedule_id=schedule.id, now=start - timedelta(minutes=30))
    occurrences = seasons_of(schedule)
    assert occurrences[1][1:] == (start, start + timedelta(days=days))
    for (_, _, earlier_end), (_, later_start, _) in itertools.pairwise(occurrences):
        assert later_start >= earlier_end


@pytest.mark.django_db
def test_season_ids_continue_after_the_highest_and_hand_made_seasons_keep_theirs(
    template: Season,
) -> None:
    SeasonFactory.create(id=5000)
    schedule = make_schedule(template)
    done = schedule_advance(schedule_id=schedule.id, now=T0)
    assert done.created == (5001,)


@pytest.mark.django_db(transaction=True)
def test_two_beats_at_once_create_each_season_once() -> None:
    template = SeasonFactory.create(starts_at=T0 - timedelta(days=30), ends_at=T0)
    schedule = schedule_create(
        slug="race",
        name="Race",
        cron="*/10 * * * *",
        template_season_id=template.id,
        lead_minutes=0,
        starts_from=T0 - timedelta(minutes=1),
    )
    now = T0 + timedelta(minutes=25)  # occurrence 1 and 2 over, 3 running
    barrier = threading.Barrier(4)
    results: list[ScheduleAdvanced | Exception] = []

    def beat() -> None:
        try:
            barrier.wait()
            results.append(schedule_advance(schedule_id=schedule.id, now=now))
        except Exception as exc:
            results.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=beat) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    done = [r for r in results if isinstance(r, ScheduleAdvanced)]
    assert len(done) == 4, results
    assert sum(len(r.created) for r in done) == 1
    assert sum(len(r.skipped) for r in done) == 2
    assert [o for o, _, _ in seasons_of(schedule)] == [3]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"cron": "0 0 * *"}, "cron must have 5 fields"),
        ({"cron": "0 0 0 * * *"}, "cron must have 5 fields"),
        ({"cron": "61 * * * *"}, "not a valid cron expression"),
        ({"cron": "0 0 30 2 *"}, "never fires"),
        ({"timezone_name": "Mars/Olympus"}, "unknown time zone"),
        # A directory of the zone database: ZoneInfo raised IsADirectoryError (a 500).
        ({"timezone_name": "Europe"}, "unknown time zone"),
        ({"template_season_id": 999_999}, "template season 999999 does not exist"),
        ({"lead_minutes": 100_000}, "lead minutes must be within"),
        ({"slug": "Not A Slug"}, "slug"),
    ],
)
def test_bad_schedules_are_refused(template: Season, changes: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        make_schedule(template, **changes)
    assert not Schedule.objects.exists()


@pytest.mark.django_db
def test_create_schedule_command(template: Season) -> None:
    out = StringIO()
    call_command(
        "create_schedule",
        "--slug",
        "weekly-cup",
        "--name",
        "Weekly cup",
        "--cron",
        "0 0 * * 1",
        "--template-season",
        str(template.id),
        "--timezone",
        "Europe/Paris",
        "--lead-minutes",
        "30",
        stdout=out,
    )
    schedule = Schedule.objects.get(slug="weekly-cup")
    assert (schedule.cron, schedule.timezone, schedule.lead_minutes) == (
        "0 0 * * 1",
        "Europe/Paris",
        30,
    )
    assert "created schedule 'weekly-cup'" in out.getvalue()
    with pytest.raises(CommandError, match="already exists"):
        call_command(
            "create_schedule",
            "--slug=weekly-cup",
            "--name=x",
            "--cron=0 0 * * 1",
            f"--template-season={template.id}",
        )
    with pytest.raises(CommandError, match="cron must have 5 fields"):
        call_command(
            "create_schedule",
            "--slug=other",
            "--name=x",
            "--cron=0 0 * *",
            f"--template-season={template.id}",
        )


@pytest.mark.django_db
def test_staff_saving_a_schedule_never_undoes_an_occurrence_created_meanwhile(
    template: Season, rf
) -> None:
    schedule = make_schedule(template)
    opened = Schedule.objects.get(pk=schedule.pk)  # the row as the change form loaded it
    form = ScheduleForm(
        data={
            "slug": opened.slug,
            "name": "Weekly cup (renamed)",
            "cron": opened.cron,
            "timezone": opened.timezone,
            "template_season": opened.template_season_id,
            "lead_minutes": opened.lead_minutes,
            "active": "on",
        },
        instance=opened,
    )
    assert form.is_valid(), form.errors
    # The beat creates occurrence 1 while the form is open (before its save takes the row).
    schedule_advance(schedule_id=schedule.id, now=T0 - timedelta(minutes=30))
    request = rf.post("/admin/seasons/schedule/")
    ScheduleAdmin(Schedule, django_admin.site).save_model(request, form.instance, form, True)
    saved = Schedule.objects.get(pk=schedule.pk)
    assert saved.name == "Weekly cup (renamed)"
    assert (saved.last_occurrence, saved.last_occurrence_at) == (1, T0)
    # So the next run goes on with occurrence 2 instead of failing on 1 again.
    done = schedule_advance(
        schedule_id=schedule.id, now=T0 + timedelta(days=6, hours=23, minutes=30)
    )
    assert done.error == ""
    assert [o for o, _, _ in seasons_of(schedule)] == [1, 2]
