"""The public HTML pages render the same entries as the API."""

from __future__ import annotations

import pytest
from django.utils.html import escape

from leaderboard.tasks import refresh_top_snapshots
from seasons.models import SeasonStatus
from tests.helpers import make_season

from .board_fixtures import write_season_board

pytestmark = pytest.mark.django_db


def test_seasons_page_links_each_board(client):
    season = make_season(name="Autumn Cup")
    response = client.get("/")
    assert response.status_code == 200
    assert b"Autumn Cup" in response.content
    assert f'href="/seasons/{season.id}"'.encode() in response.content


def test_seasons_page_pages_the_seasons_newest_first(client, monkeypatch):
    monkeypatch.setattr("leaderboard.views.SEASONS_PER_PAGE", 2)
    names = [make_season(name=f"Cup {n}").name for n in range(5)]
    assert len(set(names)) == 5
    html = client.get("/").content.decode()
    assert "page 1 of 3" in html
    assert '<a href="?page=2" rel="next">Older seasons</a>' in html
    assert 'rel="prev"' not in html
    # The same start: the higher id first.
    assert [name for name in names if f">{name}</a>" in html] == ["Cup 3", "Cup 4"]
    listed = []
    for number in (1, 2, 3):
        page = client.get(f"/?page={number}").content.decode()
        listed += [name for name in names if f">{name}</a>" in page]
    # Every season once, across the pages.
    assert sorted(listed) == sorted(names)
    last = client.get("/?page=3").content.decode()
    assert '<a href="?page=2" rel="prev">Newer seasons</a>' in last
    assert 'rel="next"' not in last
    for bad in ("4", "0", "x"):
        assert client.get(f"/?page={bad}").status_code == 404, bad


def test_board_page_shows_the_top_and_a_player_lookup(client, board_redis):
    season = make_season()
    write_season_board(board_redis, season)
    response = client.get(f"/seasons/{season.id}")
    assert response.status_code == 200
    html = response.content.decode()
    assert "Top 7" in html
    assert (
        html.index('data-player="2"')
        < html.index('data-player="1"')
        < html.index('data-player="6"')
    )
    # The season's top list is live: the table names the JSON list live.js polls.
    assert f'data-live-url="/api/seasons/{season.id}/boards/main/top?limit=100"' in html
    assert "leaderboard/live.js" in html

    response = client.get(f"/seasons/{season.id}?player=6")
    html = response.content.decode()
    assert "Rank <strong>7</strong> of 7" in html
    assert "201 points to the next rank" in html
    assert '<tr data-player="6" class="me">' in html
    assert "percentile" in html.lower()


@pytest.mark.parametrize(
    ("player", "status", "message"),
    [
        # A malformed id is bad input; a well-formed one without a score is an answer.
        ("abc", 400, "&#x27;abc&#x27; is not a player id (a positive integer)."),
        ("999", 200, "Player 999 has no score this season."),
    ],
)
def test_board_page_lookup_errors(client, board_redis, player, status, message):
    season = make_season()
    write_season_board(board_redis, season)
    response = client.get(f"/seasons/{season.id}?player={player}")
    assert response.status_code == status
    html = response.content.decode()
    assert message in html
    assert 'data-player="2"' in html  # the board is still shown


def test_unknown_season_page_is_404(client):
    assert client.get("/seasons/987654").status_code == 404


def test_unknown_board_page_is_a_404_page_that_says_what_is_missing(client):
    season = make_season()
    response = client.get(f"/seasons/{season.id}/boards/nope")
    assert response.status_code == 404
    html = response.content.decode()
    assert "Page not found" in html
    assert f"Season {season.id} has no board &#x27;nope&#x27;." in html


def test_a_path_that_matches_nothing_is_a_404_page_naming_the_path(client):
    response = client.get("/no/such/page")
    assert response.status_code == 404
    html = response.content.decode()
    assert "There is nothing at /no/such/page." in html
    assert "Resolver404" not in html


def test_go_to_rank_pages_from_any_depth(client, board_redis):
    season = make_season()
    write_season_board(board_redis, season)
    html = client.get(f"/seasons/{season.id}?start=4").content.decode()
    assert "Ranks 4 to 103" in html
    # Ranks 4, 4, 6, 7: players 5 and 4 share rank 4.
    assert html.index('data-player="5"') < html.index('data-player="4"')
    assert 'data-player="3"' not in html
    assert "data-live-url" not in html  # a deep page is not polled
    assert f'href="/seasons/{season.id}?start=1" rel="prev"' in html

    response = client.get(f"/seasons/{season.id}?start=0")
    assert response.status_code == 400
    html = response.content.decode()
    assert "Rank: Ensure this value is greater than or equal to 1." in html


def test_daily_and_weekly_tabs_show_those_boards_live(client, board_redis):
    from datetime import UTC, datetime, timedelta

    from .board_fixtures import write_daily_board

    now = datetime.now(UTC)
    season = make_season(starts_at=now - timedelta(days=3), ends_at=now + timedelta(days=3))
    today = now.date()
    write_daily_board(board_redis, season, today, {77: (900, 1)})
    html = client.get(f"/seasons/{season.id}?period=daily").content.decode()
    assert 'data-player="77"' in html
    assert f"/daily/{today.isoformat()}/top?limit=100" in html
    assert 'aria-current="page">Daily' in html

    year, week, _ = today.isocalendar()
    html = client.get(f"/seasons/{season.id}?period=weekly").content.decode()
    # The week's board is built from the daily boards on the first request.
    assert 'data-player="77"' in html
    assert f"/weekly/{year:04d}-W{week:02d}/top?limit=100" in html


def test_board_page_is_a_503_page_when_redis_is_down(client, monkeypatch):
    import redis

    from leaderboard.selectors import rankings, top

    season = make_season()
    # A real client on a port nothing listens on: the read fails as it does when Redis is gone.
    dead = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.5)
    monkeypatch.setattr(top, "get_board_redis", lambda: dead)
    monkeypatch.setattr(top, "get_board_read_redis", lambda: dead)  # the read selectors'
    monkeypatch.setattr(rankings, "get_board_read_redis", lambda: dead)
    response = client.get(f"/seasons/{season.id}")
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert "The leaderboard is unavailable" in response.content.decode()


def test_the_live_top_list_carries_the_version_and_etag_of_its_entries(client, board_redis):
    season = make_season(status=SeasonStatus.ACTIVE)
    write_season_board(board_redis, season)
    refresh_top_snapshots()
    html = client.get(f"/seasons/{season.id}").content.decode()
    api = client.get(f"/api/seasons/{season.id}/boards/main/top?limit=100")
    assert api["X-Leaderboard-Source"] == "snapshot"
    # live.js starts from them: it ignores an answer older than the list the page rendered,
    # and its first poll sends the ETag (a 304 while nothing changed).
    assert f'data-version="{api["X-Snapshot-Version"]}"' in html
    assert f'data-etag="{escape(api["ETag"])}"' in html


def _live_season(days: int = 10):
    from datetime import UTC, datetime, timedelta

    now = datetime.now(UTC)
    return make_season(starts_at=now - timedelta(days=days), ends_at=now + timedelta(days=3))


@pytest.mark.parametrize(
    ("query", "message", "shown"),
    [
        ("period=monthly", "&#x27;monthly&#x27; is not a period", "top 100 of the season"),
        ("start=-3", "Rank: Ensure this value is greater than or equal to 1.", "of the season"),
        ("start=1e3", "Rank: A valid integer is required.", "top 100 of the season"),
        ("period=daily&day=yesterday", "Day: must be a date as YYYY-MM-DD", "(UTC day)"),
        ("period=weekly&week=2026-42", "Week: must be an ISO week as YYYY-Www", "of week"),
        ("player=0", "&#x27;0&#x27; is not a player id", "top 100 of the season"),
    ],
)
def test_a_refused_parameter_is_a_400_page_that_says_why(
    client, board_redis, query, message, shown
):
    season = _live_season()
    write_season_board(board_redis, season)
    response = client.get(f"/seasons/{season.id}?{query}")
    assert response.status_code == 400
    html = response.content.decode()
    assert f'<p class="error" role="alert">{message}' in html
    # The page is whole: the list the query would have shown without the refused parameter.
    assert shown in html
    assert "<table" in html


def test_a_parameter_of_another_period_is_ignored_not_refused(client, board_redis):
    season = _live_season()
    write_season_board(board_redis, season)
    response = client.get(f"/seasons/{season.id}?period=daily&start=0&week=nope")
    assert response.status_code == 200
    assert 'role="alert"' not in response.content.decode()


def test_the_daily_tab_shows_the_day_asked_for(client, board_redis):
    from datetime import timedelta

    from django.utils import timezone

    from .board_fixtures import write_daily_board

    season = _live_season()
    today = timezone.now().date()
    yesterday = today - timedelta(days=1)
    write_daily_board(board_redis, season, yesterday, {41: (500, 1)})
    write_daily_board(board_redis, season, today, {42: (900, 1)})
    response = client.get(f"/seasons/{season.id}?period=daily&day={yesterday.isoformat()}")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-player="41"' in html
    assert 'data-player="42"' not in html
    assert f"top 100 of {yesterday.isoformat()} (UTC day)" in html
    assert f"/daily/{yesterday.isoformat()}/top?limit=100" in html
    assert f'value="{yesterday.isoformat()}"' in html  # the day picker shows it
    # The tab links to the season's current day.
    assert f"?period=daily&amp;day={today.isoformat()}" in html


def test_the_weekly_tab_builds_and_shows_the_week_asked_for(client, board_redis):
    from datetime import timedelta

    from django.utils import timezone

    from .board_fixtures import write_daily_board

    season = _live_season()
    last_week_day = timezone.now().date() - timedelta(days=7)
    year, week, _ = last_week_day.isocalendar()
    label = f"{year:04d}-W{week:02d}"
    write_daily_board(board_redis, season, last_week_day, {51: (300, 1)})
    response = client.get(f"/seasons/{season.id}?period=weekly&week={label}")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-player="51"' in html
    assert f"top 100 of week {label}" in html
    assert f"/weekly/{label}/top?limit=100" in html
    assert 'aria-current="page">Weekly' in html


def test_a_lookup_on_the_daily_tab_is_on_the_season_board(client, board_redis):
    from django.utils import timezone

    from .board_fixtures import write_daily_board

    season = _live_season()
    write_season_board(board_redis, season)
    write_daily_board(board_redis, season, timezone.now().date(), {77: (900, 1)})
    html = client.get(f"/seasons/{season.id}?period=daily&player=6").content.decode()
    assert 'data-player="77"' in html  # the day's list
    assert "Rank <strong>7</strong> of 7" in html  # the season's standing
    assert 'aria-current="page">Daily' in html


def test_a_deep_page_lookup_keeps_the_page(client, board_redis):
    season = _live_season()
    write_season_board(board_redis, season)
    html = client.get(f"/seasons/{season.id}?start=4&player=2").content.decode()
    assert "Ranks 4 to 103" in html
    assert "Rank <strong>1</strong> of 7" in html
    assert "data-live-url" not in html
