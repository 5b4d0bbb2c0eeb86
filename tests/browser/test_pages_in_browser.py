"""The public pages, the staff dashboard and the API docs in a real browser (chromium)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from leaderboard import keys
from tests.helpers import main_board_id, make_season
from tests.leaderboard.board_fixtures import write_board, write_season_board
from tests.leaderboard.live import ingest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _live_season(**kwargs):
    now = datetime.now(UTC)
    return make_season(
        starts_at=now - timedelta(days=1),
        ends_at=now + timedelta(days=5),
        status="active",
        **kwargs,
    )


def test_top_list_renders_and_moves_after_an_ingested_result(page, board_redis, screenshot):
    season = _live_season(name="Live Cup")
    write_season_board(board_redis, season)
    page.goto(f"/seasons/{season.id}")
    table = page.locator("table[data-live-url]")
    expect(table.locator("caption")).to_contain_text("top 100 of the season")
    expect(table.locator("tbody tr")).to_have_count(7)
    expect(table.locator("tbody tr").first).to_have_attribute("data-player", "2")
    # The page has polled at least once (the live script runs).
    expect(table).to_have_attribute("data-updated", re.compile(r"\d+"))

    # A result through ingestion's own path (PostgreSQL, then the board's apply script).
    ingest(board_redis, season, player_id=777, points=9000, at=datetime.now(UTC))
    moved = table.locator('tbody tr[data-player="777"]')
    expect(moved).to_have_class(re.compile(r"\bchanged\b"), timeout=5000)
    expect(moved.locator("td").first).to_have_text("1")
    expect(table.locator("tbody tr")).to_have_count(8)
    assert page.evaluate("performance.getEntriesByType('navigation').length") == 1  # no reload
    screenshot("top-moved")


def test_the_live_list_says_when_the_service_is_down(page, board_redis):
    season = _live_season()
    write_season_board(board_redis, season)
    page.route(
        re.compile(r".*/api/seasons/\d+/boards/main/top.*"),
        lambda route: route.fulfill(status=503, body='{"detail": "down"}'),
    )
    page.goto(f"/seasons/{season.id}")
    expect(page.locator("#live-status")).to_contain_text("unavailable", timeout=5000)
    # The last list stays readable: no broken table.
    expect(page.locator("table.entries tbody tr")).to_have_count(7)


def test_player_lookup_on_a_phone(page, board_redis, screenshot):
    season = _live_season()
    write_season_board(board_redis, season)
    page.set_viewport_size({"width": 375, "height": 740})
    page.goto(f"/seasons/{season.id}")
    page.get_by_label("Find a player").fill("6")
    page.get_by_role("button", name="Look up").click()
    section = page.locator("section.player")
    expect(section.get_by_role("heading")).to_have_text("Player 6")
    expect(section).to_contain_text("Rank 7 of 7")
    expect(section).to_contain_text("201 points to the next rank")
    expect(section).to_contain_text("14.29")  # percentile
    expect(section.locator("tr.me")).to_have_attribute("data-player", "6")
    # Usable on a phone: nothing wider than the screen.
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    screenshot("phone-lookup")


def test_go_to_a_deep_rank(page, board_redis):
    season = _live_season()
    players = {player: (100_000 - player, 0) for player in range(1, 3001)}
    write_board(board_redis, keys.board(board_id=main_board_id(season.id)), season, players)
    page.goto(f"/seasons/{season.id}")
    page.get_by_label("Go to rank").fill("2345")
    page.get_by_role("button", name="Go", exact=True).click()
    rows = page.locator("table.entries tbody tr")
    expect(rows).to_have_count(100)
    expect(rows.first.locator("td").first).to_have_text("2345")
    expect(rows.first).to_have_attribute("data-player", "2345")
    page.get_by_role("link", name="Next 100").click()
    expect(rows.first.locator("td").first).to_have_text("2445")


def test_unknown_season_is_a_clear_404_page(page):
    response = page.goto("/seasons/987654")
    assert response is not None
    assert response.status == 404
    expect(page.get_by_role("heading", level=1)).to_have_text("Page not found")
    expect(page.get_by_role("alert")).to_have_text("Season 987654 does not exist.")


def test_staff_dashboard_after_login(page, board_redis, screenshot, settings):
    settings.KAFKA_DEAD_LETTER_TOPIC = "no-such-topic-browser"
    season = _live_season(name="Dash Season")
    write_season_board(board_redis, season)
    from django.contrib.auth.models import Permission

    from leaderboard_project.dashboard import SECTION_PERMISSIONS

    ops = get_user_model().objects.create_user("ops", password="s3cret-pass", is_staff=True)
    for perm in SECTION_PERMISSIONS.values():  # what each section of the dashboard needs
        app_label, codename = perm.split(".")
        ops.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    page.goto("/admin/")
    page.get_by_label("Username").fill("ops")
    page.get_by_label("Password").fill("s3cret-pass")
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("link", name="Live dashboard").click()
    expect(page).to_have_url(re.compile(r"/admin/dashboard$"))
    expect(page.locator("svg.chart")).to_have_count(3)
    expect(page.locator("section.season-panel")).to_contain_text("Dash Season")
    expect(page.locator("section.season-panel")).to_contain_text("no snapshot")
    screenshot("dashboard")


def test_api_docs_render_offline(page, live_server, screenshot):
    outside: list[str] = []

    def only_this_server(route):
        if route.request.url.startswith(live_server.url):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", only_this_server)
    page.goto("/api/docs")
    expect(page.locator(".swagger-ui .opblock").first).to_be_visible()
    expect(page.locator(".swagger-ui")).to_contain_text("/api/seasons")
    assert outside == []
    screenshot("api-docs")


def test_the_live_list_ignores_an_answer_older_than_the_one_on_screen(page, board_redis):
    """Two polls answered by two server processes, the second a version behind the first: the
    page keeps the newer list (and an answer older than the list the page rendered is ignored
    from the start)."""
    season = _live_season()
    write_season_board(board_redis, season)
    newer, older = 4_000_000_000_000_000, 3_000_000_000_000_000
    answers = [
        (1000, 901),  # older than the server-rendered list
        (newer, 902),
        (older, 903),  # a process a version behind
    ]
    calls: list[dict[str, str]] = []

    def answer(route):
        calls.append(route.request.headers)
        version, player = answers[len(calls) - 1] if len(calls) <= len(answers) else (newer, 902)
        route.fulfill(
            status=200,
            headers={"X-Snapshot-Version": str(version), "ETag": f'"{version}-{player}"'},
            content_type="application/json",
            body=json.dumps([{"rank": 1, "playerId": player, "points": 10_000}]),
        )

    page.route(re.compile(r".*/api/seasons/\d+/boards/main/top.*"), answer)
    page.goto(f"/seasons/{season.id}")
    table = page.locator("table[data-live-url]")
    rendered_etag = table.get_attribute("data-etag")
    assert int(table.get_attribute("data-version") or 0) > 1000
    rows = table.locator("tbody tr")
    expect(rows).to_have_count(1)  # the newer answer replaced the server-rendered list
    expect(rows.first).to_have_attribute("data-player", "902")
    expect(table).to_have_attribute("data-version", str(newer))
    # Polls are sequential: once the fourth request is out, the third answer was handled.
    while len(calls) < 4:
        with page.expect_request(re.compile(r".*/api/seasons/\d+/boards/main/top.*")):
            pass
    expect(rows.first).to_have_attribute("data-player", "902")
    expect(table).to_have_attribute("data-version", str(newer))
    assert page.locator('tbody tr[data-player="901"], tbody tr[data-player="903"]').count() == 0
    # The first poll sent the ETag of the rendered list; the ignored answers' ETags were never
    # sent.
    assert calls[0].get("if-none-match") == rendered_etag
    assert calls[2].get("if-none-match") == f'"{newer}-902"'
    assert calls[3].get("if-none-match") == f'"{newer}-902"'


def test_the_live_list_shows_names_and_flags_and_redraws_a_rename(page, board_redis):
    from players.schema import ProfileUpdate
    from players.services import player_profiles_upsert

    season = _live_season()
    write_season_board(board_redis, season)
    at = datetime(2026, 1, 1, tzinfo=UTC)
    player_profiles_upsert(profiles=[ProfileUpdate(2, "Alice", "FR", None, at)])
    page.goto(f"/seasons/{season.id}")
    table = page.locator("table[data-live-url]")
    first = table.locator('tbody tr[data-player="2"]')
    expect(first.locator("a")).to_have_text("Alice")
    expect(first.locator(".flag")).to_have_text("\U0001f1eb\U0001f1f7")
    expect(table.locator('tbody tr[data-player="6"] a')).to_have_text("Player 6")
    # A rename (scores unchanged) reaches the open page through live.js, flag redrawn too.
    later = at + timedelta(hours=1)
    player_profiles_upsert(profiles=[ProfileUpdate(2, "Alicia", "JP", None, later)])
    expect(first.locator("a")).to_have_text("Alicia", timeout=5000)
    expect(first.locator(".flag")).to_have_text("\U0001f1ef\U0001f1f5")
    expect(first.locator(".flag")).to_have_attribute("aria-label", "JP")
    assert page.evaluate("performance.getEntriesByType('navigation').length") == 1  # no reload


def test_a_metadata_board_shows_each_entrys_details_and_redraws_them_live(page, board_redis):
    from leaderboard.models import MatchResult
    from tests.leaderboard.live import apply, store

    def ingest_with(metadata: dict, *, points: int) -> None:
        # Stored with its metadata before it reaches the board, as the consumer does.
        result, xid = store(season, player_id=5, points=points, at=datetime.now(UTC))
        MatchResult.objects.filter(pk=result.pk).update(metadata=metadata)
        apply(board_redis, season, result, xid)

    season = _live_season(keeps_metadata=True)
    ingest_with({"car": "Boreal R", "laps": 3}, points=100)
    page.goto(f"/seasons/{season.id}")
    table = page.locator("table[data-live-url]")
    expect(table.locator("thead th").last).to_have_text("Details")
    expect(table.locator('tbody tr[data-player="5"] td.meta')).to_have_text(
        "car: Boreal R · laps: 3"
    )
    # A better result with its own metadata reaches the open page through live.js.
    ingest_with({"car": "Ember RS"}, points=200)
    expect(table.locator('tbody tr[data-player="5"] td.meta')).to_have_text(
        "car: Ember RS", timeout=5000
    )
    assert page.evaluate("performance.getEntriesByType('navigation').length") == 1  # no reload


def test_a_tiebreak_board_shows_each_column_and_redraws_them_live(page, board_redis):
    from leaderboard.models import TiebreakColumn
    from tests.factories import board_factory

    season = _live_season()
    columns = (TiebreakColumn("kills", "desc"), TiebreakColumn("deaths", "asc"))
    board_factory(season, "arena", name="Arena", tiebreaks=columns)
    send = _Ingest(season.id, "arena")

    def ingest_result(player: int, points: int, kills: int, deaths: int) -> None:
        send(player, points, tiebreakers={"kills": kills, "deaths": deaths})

    # Equal points: more kills first, then fewer deaths.
    ingest_result(1, 50, 3, 9)
    ingest_result(2, 50, 7, 4)
    ingest_result(3, 50, 7, 2)
    page.goto(f"/seasons/{season.id}/boards/arena")
    expect(page.locator("p.meta", has_text="ties broken")).to_contain_text(
        "ties broken by most kills, then fewest deaths"
    )
    table = page.locator("table[data-live-url]")
    expect(table.locator("thead th")).to_have_text(["Rank", "Player", "Points", "kills", "deaths"])
    rows = table.locator("tbody tr")
    expect(rows).to_have_count(3)
    assert [rows.nth(i).get_attribute("data-player") for i in range(3)] == ["3", "2", "1"]
    expect(rows.first.locator("td")).to_have_text(["1", "Player 3", "50", "7", "2"])
    # Player 1 passes both on kills alone (same points) and the open page redraws it.
    ingest_result(1, 50, 8, 9)
    expect(rows.first).to_have_attribute("data-player", "1", timeout=5000)
    expect(rows.first.locator("td")).to_have_text(["1", "Player 1", "50", "8", "9"])


def test_a_max_attempts_board_shows_each_players_attempts_and_redraws_them_live(page, board_redis):
    from tests.factories import board_factory

    season = _live_season()
    board_factory(season, "cup", name="Cup", max_attempts=3)
    send = _Ingest(season.id, "cup")
    send(1, 40)
    send(1, 30)
    send(2, 50)
    page.goto(f"/seasons/{season.id}/boards/cup")
    expect(page.locator("p.meta.tournament")).to_contain_text("at most 3 attempts per player")
    table = page.locator("table[data-live-url]")
    expect(table.locator("thead th")).to_have_text(["Rank", "Player", "Points", "Attempts"])
    rows = table.locator("tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.first.locator("td")).to_have_text(["1", "Player 2", "50", "1/3"])
    expect(rows.nth(1).locator("td")).to_have_text(["2", "Player 1", "40", "2/3"])
    # Player 1's third attempt takes the lead: the open page redraws the row with 3/3.
    send(1, 60)
    expect(rows.first).to_have_attribute("data-player", "1", timeout=5000)
    expect(rows.first.locator("td")).to_have_text(["1", "Player 1", "60", "3/3"])


class _Ingest:
    """Results of one board through ingestion's batch handler, as the consumer sends them."""

    def __init__(self, season_id: int, board: str) -> None:
        self.season_id, self.board = season_id, board
        self.offsets = iter(range(1000))

    def __call__(self, player: int, points: int, **fields: object) -> None:
        import uuid

        from django.conf import settings

        from ingestion.records import ConsumedRecord
        from ingestion.services import match_results_ingest

        body = {
            "matchId": str(uuid.uuid4()),
            "playerId": player,
            "seasonId": self.season_id,
            "points": points,
            "achievedAt": datetime.now(UTC).isoformat(),
            "board": self.board,
            **fields,
        }
        record = ConsumedRecord(0, next(self.offsets), b"%d" % player, json.dumps(body).encode())
        # The configured topic: the board's watermark is that topic's.
        match_results_ingest(
            topic=settings.KAFKA_MATCH_RESULTS_TOPIC, records=[record], dead_letters=_NoLetters()
        )


class _NoLetters:
    def publish(self, *, letters) -> None:
        raise AssertionError(f"unexpected dead letters: {letters}")


def test_a_league_board_marks_only_the_rows_that_moved(page, board_redis):
    """live.js compared each row's rank and points with the list before; on a league board the
    tier sits where the points are elsewhere, and every row was marked as moved at every redraw."""
    from leaderboard.models import Board

    season = _live_season()
    Board.objects.filter(season=season).update(cohort_size=50, tiers=["bronze", "silver"])
    write_season_board(board_redis, season)
    page.goto(f"/seasons/{season.id}")
    table = page.locator("table[data-live-url][data-tiers]")
    expect(table.locator("thead th").nth(2)).to_have_text("Tier")
    expect(table.locator("tbody tr")).to_have_count(7)
    ingest(board_redis, season, player_id=777, points=9000, at=datetime.now(UTC))
    moved = table.locator('tbody tr[data-player="777"]')
    expect(moved).to_have_class(re.compile(r"\bchanged\b"), timeout=5000)
    # Everyone else moved down one rank: those are changes too; their points are not.
    expect(table.locator("tbody tr.changed")).to_have_count(8)
    # A redraw where only one player's points change marks that row alone.
    ingest(board_redis, season, player_id=777, points=9500, at=datetime.now(UTC))
    expect(moved.locator("td").nth(3)).to_have_text("9500", timeout=5000)
    expect(table.locator("tbody tr.changed")).to_have_count(1)
