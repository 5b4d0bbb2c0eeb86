"""Daily and weekly boards: the daily top, and weekly boards built from the daily ones."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from django.utils import timezone

from leaderboard import keys
from leaderboard.models import ScoringRule
from leaderboard.services import WeeklyBuildError, derived, weekly_board_build
from leaderboard.tasks import build_weekly_boards
from seasons.models import SeasonStatus
from seasons.selectors import SeasonRef
from tests.helpers import (
    as_board,
    board_read,
    main_board_id,
    make_live_season,
    make_season,
    mark_intact,
)
from tests.leaderboard import live

from .board_fixtures import entry, write_daily_board

pytestmark = pytest.mark.django_db


def past_monday(weeks_ago: int) -> date:
    today = timezone.now().date()
    return today - timedelta(days=today.weekday() + 7 * weeks_ago)


def season_over(monday: date, rule=ScoringRule.BEST, **kwargs):
    starts = datetime.combine(monday - timedelta(days=14), datetime.min.time(), tzinfo=UTC)
    return make_season(starts_at=starts, ends_at=starts + timedelta(days=90), rule=rule, **kwargs)


def week_label(monday: date) -> str:
    year, week, _ = monday.isocalendar()
    return f"{year}-W{week:02d}"


def test_daily_top(client, board_redis):
    season = make_season()
    day = date(2026, 10, 2)
    write_daily_board(board_redis, season, day, {1: (50, 3), 2: (70, 9), 3: (50, 1)})
    write_daily_board(board_redis, season, day + timedelta(days=1), {4: (999, 0)})
    url = f"/api/seasons/{season.id}/leaderboard/daily/2026-10-02/top"
    response = client.get(url)
    assert response.status_code == 200
    assert response.json() == [entry(1, 2, 70), entry(2, 3, 50), entry(3, 1, 50)]
    assert response["Cache-Control"] == "max-age=1"
    assert client.get(f"{url}?limit=1").json() == [entry(1, 2, 70)]
    empty = f"/api/seasons/{season.id}/leaderboard/daily/2026-10-09/top"
    assert client.get(empty).json() == []


@pytest.mark.parametrize(
    "day", ["2026-13-01", "2026-02-30", "20261002", "2026-1-2", "today", "9999-12-31"]
)
def test_daily_rejects_a_malformed_day(client, day):
    season = make_season()
    response = client.get(f"/api/seasons/{season.id}/leaderboard/daily/{day}/top")
    assert response.status_code == 400
    assert "day" in response.json()["errors"]


@pytest.mark.parametrize("week", ["2026-41", "2026-W1", "2026-W00", "2025-W53", "2026W41", "x"])
def test_weekly_rejects_a_malformed_week(client, week):
    season = make_season()
    response = client.get(f"/api/seasons/{season.id}/leaderboard/weekly/{week}/top")
    assert response.status_code == 400
    assert "week" in response.json()["errors"]


def test_weekly_best_is_the_max_over_the_week_days(client, board_redis):
    monday = past_monday(2)
    season = season_over(monday)
    write_daily_board(board_redis, season, monday, {1: (100, 10), 2: (150, 20), 3: (80, 5)})
    write_daily_board(board_redis, season, monday + timedelta(days=6), {1: (200, 90), 3: (80, 3)})
    # Outside the week: ignored.
    write_daily_board(board_redis, season, monday + timedelta(days=7), {4: (999, 100)})
    write_daily_board(board_redis, season, monday - timedelta(days=1), {5: (999, 1)})
    url = f"/api/seasons/{season.id}/leaderboard/weekly/{week_label(monday)}/top"
    # Built on demand on the first request.
    assert client.get(url).json() == [entry(1, 1, 200), entry(2, 2, 150), entry(3, 3, 80)]
    year, week, _ = monday.isocalendar()
    weekly = keys.weekly_board(board_id=main_board_id(season.id), iso_year=year, iso_week=week)
    codec = as_board(season).codec
    # Of equal points, the earliest time is kept (best rule).
    assert int(board_redis.zscore(weekly, "3")) == codec.encode(points=80, elapsed_ticks=3)
    assert board_redis.ttl(weekly) > 0


def test_weekly_cumulative_adds_points_and_keeps_the_latest_time(board_redis):
    monday = past_monday(1)
    season = season_over(monday, rule=ScoringRule.CUMULATIVE)
    write_daily_board(board_redis, season, monday, {1: (100, 10), 2: (150, 20)})
    write_daily_board(board_redis, season, monday + timedelta(days=2), {1: (200, 90)})
    write_daily_board(board_redis, season, monday + timedelta(days=3), {1: (5, 40), 3: (1, 1)})
    year, week, _ = monday.isocalendar()
    size = weekly_board_build(
        board=as_board(SeasonRef.from_model(season)), iso_year=year, iso_week=week
    )
    assert size == 3
    weekly = keys.weekly_board(board_id=main_board_id(season.id), iso_year=year, iso_week=week)
    codec = as_board(season).codec
    scores = {m.decode(): int(s) for m, s in board_redis.zrange(weekly, 0, -1, withscores=True)}
    assert scores == {
        "1": codec.encode(points=305, elapsed_ticks=90),
        "2": codec.encode(points=150, elapsed_ticks=20),
        "3": codec.encode(points=1, elapsed_ticks=1),
    }
    # No build keys are left behind.
    assert sorted(board_redis.scan_iter(match=f"{weekly}*")) == [weekly.encode()]


def test_weekly_cumulative_overflow_is_an_error_and_leaves_no_board(board_redis):
    monday = past_monday(1)
    season = season_over(monday, rule=ScoringRule.CUMULATIVE)
    top = as_board(season).codec.max_points
    write_daily_board(board_redis, season, monday, {1: (top, 1)})
    write_daily_board(board_redis, season, monday + timedelta(days=1), {1: (1, 2)})
    year, week, _ = monday.isocalendar()
    with pytest.raises(WeeklyBuildError, match="exceed"):
        weekly_board_build(
            board=as_board(SeasonRef.from_model(season)), iso_year=year, iso_week=week
        )
    assert (
        list(board_redis.scan_iter(match=keys.board_pattern(board_id=main_board_id(season.id))))
        != []
    )
    weekly = keys.weekly_board(board_id=main_board_id(season.id), iso_year=year, iso_week=week)
    assert list(board_redis.scan_iter(match=f"{weekly}*")) == []


def test_a_week_that_cannot_be_built_is_a_503_and_is_not_rebuilt_per_request(
    client, board_redis, monkeypatch
):
    """On demand, an overflowing cumulative week was a 500 (and the next request built seven
    days again); the requests that found another building it got the missing key's [] as the
    week."""
    monday = past_monday(1)
    season = season_over(monday, rule=ScoringRule.CUMULATIVE)
    mark_intact(season)
    top = as_board(season).codec.max_points
    write_daily_board(board_redis, season, monday, {1: (top, 1)})
    write_daily_board(board_redis, season, monday + timedelta(days=1), {1: (1, 2)})
    url = f"/api/seasons/{season.id}/leaderboard/weekly/{week_label(monday)}/top"
    builds: list[int] = []
    real_build = derived.weekly_board_build

    def counted_build(**kwargs):
        builds.append(1)
        return real_build(**kwargs)

    monkeypatch.setattr(derived, "weekly_board_build", counted_build)
    for _ in range(3):
        response = client.get(url)
        assert response.status_code == 503, response.content
        assert response.json()["code"] == "week_unavailable"
        assert "cannot be built" in response.json()["detail"]
        assert int(response["Retry-After"]) > 0
    assert builds == [1]

    # Another request building the week: "retry in a moment", not an empty week.
    other = season_over(monday)
    mark_intact(other)
    write_daily_board(board_redis, other, monday, {1: (10, 1)})
    year, week, _ = monday.isocalendar()
    weekly = keys.weekly_board(board_id=main_board_id(other.id), iso_year=year, iso_week=week)
    board_redis.set(keys.weekly_build_lock(board_key=weekly), "1", ex=60)
    response = client.get(f"/api/seasons/{other.id}/leaderboard/weekly/{week_label(monday)}/top")
    assert response.status_code == 503
    assert "being built" in response.json()["detail"]
    board_redis.delete(keys.weekly_build_lock(board_key=weekly))
    response = client.get(f"/api/seasons/{other.id}/leaderboard/weekly/{week_label(monday)}/top")
    assert [e["playerId"] for e in response.json()] == [1]


def test_the_task_builds_the_current_week_of_active_seasons(board_redis):
    monday = past_monday(0)
    season = season_over(monday, status=SeasonStatus.ACTIVE)
    write_daily_board(board_redis, season, monday, {1: (10, 1)})
    built = build_weekly_boards()
    year, week, _ = monday.isocalendar()
    assert built[f"{main_board_id(season)}:{year}-W{week:02d}"] == 1
    weekly = keys.weekly_board(board_id=main_board_id(season.id), iso_year=year, iso_week=week)
    assert board_redis.zcard(weekly) == 1


def test_a_future_week_is_empty_and_not_built(client, board_redis):
    monday = past_monday(-2)
    season = season_over(monday)
    mark_intact(season)
    url = f"/api/seasons/{season.id}/leaderboard/weekly/{week_label(monday)}/top"
    assert client.get(url).json() == []
    year, week, _ = monday.isocalendar()
    lock = keys.weekly_build_lock(
        board_key=keys.weekly_board(board_id=main_board_id(season.id), iso_year=year, iso_week=week)
    )
    assert not board_redis.exists(lock)


def test_a_late_result_for_a_past_week_reaches_its_weekly_board_at_the_next_build(
    board_redis,
):
    now = timezone.now()
    season = make_live_season(days=30)
    mark_intact(season)
    board = as_board(season)
    # Wednesday and Thursday of the week before last: a week the build no longer rebuilds.
    wednesday = (now - timedelta(days=14 + now.weekday() - 2)).replace(
        hour=12, minute=0, second=0, microsecond=0
    )
    iso_year, iso_week, _ = wednesday.isocalendar()
    weekly = keys.weekly_board(board_id=board.id, iso_year=iso_year, iso_week=iso_week)
    live.ingest(board_redis, season, player_id=1, points=10, at=wednesday)
    weekly_board_build(board=board, iso_year=iso_year, iso_week=iso_week)
    board_redis.delete(keys.weekly_late(board_id=board.id))  # built with player 1 already
    assert set(board_read(board_redis, weekly)) == {1}

    # Played on Thursday, ingested only now (a queue flushed after an outage).
    live.ingest(board_redis, season, player_id=2, points=20, at=wednesday + timedelta(days=1))
    assert board_redis.smembers(keys.weekly_late(board_id=board.id)) == {
        f"{iso_year:04d}-W{iso_week:02d}".encode()
    }
    build_weekly_boards()
    assert set(board_read(board_redis, weekly)) == {1, 2}
    # The mark is taken: the next build leaves the week alone.
    assert board_redis.exists(keys.weekly_late(board_id=board.id)) == 0


def test_only_results_of_weeks_the_build_no_longer_covers_are_marked_late() -> None:
    from leaderboard.services.apply import CountedGroup, _late_weeks

    def group(board_id: int, *days: date) -> CountedGroup:
        n = len(days)
        return CountedGroup(0, board_id, [0] * n, [1] * n, [1] * n, [0] * n, list(days), [1] * n)

    monday = date(2026, 11, 30)
    sunday, older = monday - timedelta(days=1), monday - timedelta(days=8)
    # Last week is late on a Monday too: a result applied after that day's last build would
    # otherwise never reach it.
    assert _late_weeks([group(7, monday, sunday, older)], today=monday) == {
        7: {"2026-W47", "2026-W48"}
    }
    assert _late_weeks([group(7, sunday)], today=monday + timedelta(days=1)) == {7: {"2026-W48"}}
    assert _late_weeks([group(7, monday)], today=monday + timedelta(days=1)) == {}


def test_the_schema_names_the_weekly_reads_503_code(client) -> None:
    schema = client.get("/api/schema", HTTP_ACCEPT="application/json").json()
    weekly = [path for path in schema["paths"] if "/weekly/" in path]
    assert weekly
    for path in weekly:
        described = schema["paths"][path]["get"]["responses"]["503"]["description"]
        assert "week_unavailable" in described, path


def test_a_week_without_daily_boards_reads_empty_and_is_not_built(client, board_redis):
    """Every read of a week nobody played built it (a build of nothing stores no board), and
    the readers that met another one's build got a 503 for the whole week."""
    monday = past_monday(1)
    season = season_over(monday)
    mark_intact(season)
    year, week, _ = monday.isocalendar()
    weekly = keys.weekly_board(board_id=main_board_id(season.id), iso_year=year, iso_week=week)
    lock = keys.weekly_build_lock(board_key=weekly)
    board_redis.set(lock, "other", ex=60)  # another reader's build of it, as it was
    url = f"/api/seasons/{season.id}/leaderboard/weekly/{week_label(monday)}/top"
    response = client.get(url)
    assert response.status_code == 200, response.content
    assert response.json() == []
    assert board_redis.get(lock) == b"other"
