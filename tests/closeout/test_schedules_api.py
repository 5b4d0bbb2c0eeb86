"""Schedules as games and staff see them: the API, the public pages and the admin."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.utils import timezone

from closeout.models import FinalStanding
from closeout.services import schedule_advance, schedule_create
from leaderboard.models import Board
from players.models import PlayerProfile
from seasons.models import Schedule, Season, SeasonStatus
from tests.factories import SeasonFactory
from tests.helpers import mark_intact


def ten_minute_cup(*, slug: str = "cup") -> Schedule:
    """A cup every 10 minutes, begun just before its occurrence three before the one running
    now, advanced to now: occurrences 1 to 3 are skipped, 4 runs."""
    now = timezone.now()
    boundary = now.replace(minute=now.minute // 10 * 10, second=0, microsecond=0)
    if boundary + timedelta(minutes=10) - now < timedelta(seconds=20):
        # Not across an occurrence while the test reads "now" through the API.
        time.sleep((boundary + timedelta(minutes=10, seconds=1) - now).total_seconds())
        now = timezone.now()
        boundary += timedelta(minutes=10)
    template = SeasonFactory.create(
        starts_at=now - timedelta(days=3), ends_at=now - timedelta(days=2)
    )
    schedule = schedule_create(
        slug=slug,
        name="Cup",
        cron="*/10 * * * *",
        template_season_id=template.id,
        lead_minutes=0,
        starts_from=boundary - timedelta(minutes=30, seconds=1),
    )
    schedule_advance(schedule_id=schedule.id, now=now)
    return schedule


def season_with_occurrence(schedule: Schedule, occurrence: int, start: datetime, **kw) -> Season:
    template = schedule.template_season
    season = Season.objects.create(
        id=9000 + occurrence,
        name=f"Cup #{occurrence}",
        starts_at=start,
        ends_at=start + timedelta(minutes=10),
        schedule=schedule,
        occurrence=occurrence,
        **kw,
    )
    Board.objects.create(
        season=season, slug="main", name="Main", time_bits=template.boards.get().time_bits
    )
    return season


@pytest.mark.django_db
def test_schedules_list_names_the_current_season_and_the_next_reset(client: Client) -> None:
    schedule = ten_minute_cup()
    current = Season.objects.get(schedule=schedule)
    body = client.get("/api/schedules").json()
    assert body == [
        {
            "slug": "cup",
            "name": "Cup",
            "cron": "*/10 * * * *",
            "timezone": "UTC",
            "active": True,
            "currentSeasonId": current.id,
            "nextResetAt": current.ends_at.isoformat().replace("+00:00", "Z"),
            "tiers": None,
            "promotePercent": None,
            "relegatePercent": None,
        }
    ]
    assert current.starts_at <= timezone.now() < current.ends_at
    assert current.ends_at.minute % 10 == 0


@pytest.mark.django_db
def test_between_seasons_the_next_reset_is_the_next_occurrence_and_paused_has_none(
    client: Client,
) -> None:
    now = timezone.now()
    template = SeasonFactory.create(
        starts_at=now - timedelta(days=3), ends_at=now - timedelta(days=2)
    )
    schedule_create(
        slug="later",
        name="Later",
        cron="0 0 1 1 *",
        template_season_id=template.id,
        lead_minutes=0,
    )
    [entry] = client.get("/api/schedules").json()
    assert entry["currentSeasonId"] is None
    assert entry["nextResetAt"] == f"{now.year + 1}-01-01T00:00:00Z"
    Schedule.objects.filter(slug="later").update(active=False)
    [entry] = client.get("/api/schedules").json()
    assert (entry["active"], entry["nextResetAt"]) == (False, None)


@pytest.mark.django_db
def test_with_the_next_season_created_ahead_the_next_reset_is_its_start(client: Client) -> None:
    now = timezone.now()
    template = SeasonFactory.create(
        starts_at=now - timedelta(days=3), ends_at=now - timedelta(days=2)
    )
    schedule = schedule_create(
        slug="hourly",
        name="Hourly",
        cron="0 * * * *",
        template_season_id=template.id,
        lead_minutes=90,
        starts_from=now,
    )
    schedule_advance(schedule_id=schedule.id, now=now)
    # Created ahead of its start (the lead), not begun: none runs, and the next to begin is it,
    # not the cron's tick after it (its end).
    upcoming = Season.objects.get(schedule=schedule, occurrence=1)
    assert upcoming.starts_at > timezone.now()
    [entry] = client.get("/api/schedules").json()
    assert entry["currentSeasonId"] is None
    assert entry["nextResetAt"] == upcoming.starts_at.isoformat().replace("+00:00", "Z")


@pytest.mark.django_db
def test_schedule_seasons_newest_first_with_limit_and_errors(client: Client) -> None:
    schedule = ten_minute_cup()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for occurrence in (1, 2):
        season_with_occurrence(
            schedule, occurrence, start + timedelta(minutes=10 * occurrence), status="closed"
        )
    body = client.get("/api/schedules/cup/seasons").json()
    assert [s["occurrence"] for s in body] == [4, 2, 1]  # 3 was skipped (and 1, 2 by it)
    assert body[1] == {
        "seasonId": 9002,
        "name": "Cup #2",
        "occurrence": 2,
        "startsAt": "2026-01-01T00:20:00Z",
        "endsAt": "2026-01-01T00:30:00Z",
        "status": "closed",
    }
    assert [s["occurrence"] for s in client.get("/api/schedules/cup/seasons?limit=1").json()] == [4]
    missing = client.get("/api/schedules/nope/seasons")
    assert (missing.status_code, missing.json()) == (
        404,
        {"detail": "schedule 'nope' does not exist"},
    )
    for bad in ("0", "101", "x"):
        response = client.get(f"/api/schedules/cup/seasons?limit={bad}")
        assert response.status_code == 400, bad
        assert "limit" in response.json()["detail"]


@pytest.mark.django_db
def test_the_seasons_list_says_which_schedule_a_season_belongs_to(client: Client) -> None:
    schedule = ten_minute_cup()
    current = Season.objects.get(schedule=schedule)
    by_id = {s["id"]: s for s in client.get("/api/seasons").json()}
    assert (by_id[current.id]["schedule"], by_id[current.id]["occurrence"]) == ("cup", 4)
    template = by_id[schedule.template_season_id]
    assert (template["schedule"], template["occurrence"]) == (None, None)
    page = client.get("/").content.decode()
    assert 'href="/schedules/cup">Cup</a> #4' in page


@pytest.mark.django_db
def test_the_seasons_list_filters_by_schedule(client: Client) -> None:
    schedule = ten_minute_cup()
    current = Season.objects.get(schedule=schedule)
    season_with_occurrence(
        schedule, 2, datetime(2026, 1, 1, tzinfo=UTC), status=SeasonStatus.CLOSED
    )
    listed = client.get("/api/seasons?schedule=cup").json()
    # Not the template season, which belongs to no schedule.
    assert len(client.get("/api/seasons").json()) == 3
    assert [(s["schedule"], s["occurrence"]) for s in listed] == [("cup", 4), ("cup", 2)]
    assert listed[0]["id"] == current.id
    assert [s["occurrence"] for s in client.get("/api/seasons?schedule=cup&limit=1").json()] == [4]
    missing = client.get("/api/seasons?schedule=nope")
    assert (missing.status_code, missing.json()) == (
        404,
        {"detail": "schedule 'nope' does not exist"},
    )


@pytest.mark.django_db
def test_the_schedule_page_shows_the_countdown_and_the_archive_of_final_standings(
    client: Client, board_redis
) -> None:
    schedule = ten_minute_cup()
    current = Season.objects.get(schedule=schedule)
    mark_intact(current)  # as the recovery does: its board answers
    past = season_with_occurrence(
        schedule, 2, datetime(2026, 1, 1, tzinfo=UTC), status=SeasonStatus.CLOSED
    )
    board = past.boards.get()
    # The past season's main board ranks by kills after points and keeps metadata: its
    # winners show both.
    Board.objects.filter(pk=board.pk).update(
        tiebreak_columns=[{"name": "kills", "order": "desc"}], keeps_metadata=True
    )
    for rank, player in enumerate((7, 8), start=1):
        FinalStanding.objects.create(
            season=past,
            board=board,
            rank=rank,
            player_id=player,
            points=100 - rank,
            reached_at=past.starts_at,
            tiebreakers={"kills": 10 - rank},
            metadata={"car": "red"} if player == 7 else None,
        )
    PlayerProfile.objects.create(
        player_id=7,
        display_name="Alice",
        country="FR",
        name_updated_at=timezone.now(),
        updated_at=timezone.now(),
    )
    page = client.get("/schedules/cup").content.decode()
    assert f'href="/seasons/{current.id}"' in page
    assert "No scores yet." in page  # the current season's top, live (empty here)
    board_page = client.get(f"/seasons/{current.id}").content.decode()
    assert 'href="/schedules/cup">Cup</a> #4' in board_page
    assert f'id="countdown" datetime="{current.ends_at.isoformat()}"' in page
    assert "Cup #2" in page
    assert '<th scope="col" class="num" title="ranked desc">kills</th>' in page
    assert (
        '<td class="num">1</td><td><span class="flag" role="img" aria-label="FR" title="FR">'
        '\U0001f1eb\U0001f1f7</span> <a href="/players/7/history">Alice</a></td>'
        '<td class="num">99</td><td class="num">9</td><td class="meta">car: red</td>'
    ) in page
    assert (
        '<td class="num">2</td><td><a href="/players/8/history">Player 8</a></td>'
        '<td class="num">98</td><td class="num">8</td><td class="meta"></td>'
    ) in page
    assert f'href="/api/seasons/{past.id}/standings"' in page
    index = client.get("/schedules").content.decode()
    assert 'href="/schedules/cup">Cup</a>' in index
    assert client.get("/schedules/nope").status_code == 404
    assert client.get("/schedules/cup?page=0").status_code == 400


# The seasons inline's management form (it lists, never adds).
INLINE = {f"seasons-{name}": "0" for name in ("TOTAL_FORMS", "INITIAL_FORMS", "MIN_NUM_FORMS")}


@pytest.mark.django_db
def test_the_admin_lists_schedules_with_next_occurrences_pauses_and_creates_through_the_service(
    staff: Client,
) -> None:
    schedule = ten_minute_cup()
    listing = staff.get("/admin/seasons/schedule/").content.decode()
    assert "*/10 * * * *" in listing
    assert "UTC" in listing  # the next occurrences, in the schedule's zone
    change = staff.get(f"/admin/seasons/schedule/{schedule.id}/change/").content.decode()
    assert "Seasons of this schedule" in change
    assert "Cup #4" in change

    staff.post(
        "/admin/seasons/schedule/",
        {"action": "pause_schedules", "_selected_action": [schedule.id]},
    )
    schedule.refresh_from_db()
    assert schedule.active is False

    response = staff.post(
        "/admin/seasons/schedule/add/",
        {
            "slug": "new-cup",
            "name": "New cup",
            "cron": "0 12 * * *",
            "timezone": "Europe/Paris",
            "template_season": schedule.template_season_id,
            "lead_minutes": 30,
            "active": "on",
            **INLINE,
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    created = Schedule.objects.get(slug="new-cup")
    assert (created.timezone, created.lead_minutes, created.active) == ("Europe/Paris", 30, True)
    refused = staff.post(
        "/admin/seasons/schedule/add/",
        {
            "slug": "bad",
            "name": "Bad",
            "cron": "0 12 * *",
            "timezone": "Nowhere/Here",
            "template_season": schedule.template_season_id,
            "lead_minutes": 30,
            **INLINE,
        },
    ).content.decode()
    assert "cron must have 5 fields" in refused
    assert "unknown time zone" in refused
    assert not Schedule.objects.filter(slug="bad").exists()
