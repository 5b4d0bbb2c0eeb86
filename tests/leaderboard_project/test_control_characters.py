"""A control character anywhere in a path is a 404 on every route the project has, never a 500.

The routes are walked from the URL resolver, so a route added later is covered without touching
this file; each gets a concrete path that resolves to it (a real season, its main board), then
a control character in every segment, percent-encoded and raw, for an anonymous client and for
staff, with GET and POST.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import date
from urllib.parse import quote

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve

from tests.helpers import make_live_season

pytestmark = pytest.mark.django_db

CONTROL_CHARACTERS = [chr(code) for code in range(0x20)] + ["\x7f"]
# The ones every route gets in every segment; the full set goes through one segment per route.
SPOT_CHARACTERS = ["\x00", "\n", "\x1f", "\x7f"]


def _routes(patterns: list, prefix: str = "") -> Iterator[tuple[str, URLPattern]]:
    for entry in patterns:
        if isinstance(entry, URLResolver):
            yield from _routes(entry.url_patterns, prefix + str(entry.pattern))
        else:
            yield prefix + str(entry.pattern), entry


def _sample(name: str, season_id: int) -> str:
    today = date.today()
    return {
        "season": str(season_id),
        "season_id": str(season_id),
        "board": "main",
        "player": "7",
        "day": today.isoformat(),
        "week": "{}-W{:02d}".format(*today.isocalendar()[:2]),
    }.get(name, "1")


def _concrete(route: str, season_id: int) -> str:
    """A path the route matches: each parameter replaced by a value of its kind."""
    # Regex routes (the admin's app index and its catch-all): the first alternative, any text.
    path = re.sub(r"\(\?P<\w+>([^|)]*)[^)]*\)", r"\1", route)
    path = path.replace(".*", "x").replace("^", "").replace("$", "")
    path = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: _sample(m.group(1), season_id), path)
    return "/" + path


def _paths(season_id: int) -> list[tuple[str, str]]:
    """(route, concrete path) for every URL pattern, checked to resolve to that very pattern."""
    paths = []
    for route, pattern in _routes(get_resolver().url_patterns):
        path = _concrete(route, season_id)
        assert resolve(path).func == pattern.callback, (route, path)
        paths.append((route, path))
    # Served by WhiteNoise ahead of the URL patterns.
    paths.append(("static", "/static/leaderboard/pages.css"))
    return paths


def _variants(path: str, characters: list[str]) -> Iterator[str]:
    """``path`` with a control character at the end of each segment, then in the first one."""
    segments = path.split("/")
    for index in range(1, len(segments)):
        for character in characters:
            changed = list(segments)
            changed[index] += character
            yield "/".join(changed)
            if index == 1 and segments[index]:
                changed[index] = character + segments[index]
                yield "/".join(changed)


def _assert_not_found(response, path: str) -> None:
    assert response.status_code == 404, (repr(path), response.status_code, response.content[:300])
    if path.startswith("/api/"):
        assert response["Content-Type"] == "application/json"
        assert "control character" in response.json()["detail"]
    else:
        assert response["Content-Type"].startswith("text/html")
        assert b"control character" in response.content


@pytest.fixture
def clients(admin_user) -> list[Client]:
    anonymous = Client(raise_request_exception=False)
    staff = Client(raise_request_exception=False)
    staff.force_login(admin_user)
    return [anonymous, staff]


def test_every_route_has_a_sample_path() -> None:
    # The walk reaches the API, the pages, the admin, healthz, metrics and the API docs.
    routes = {route for route, _ in _paths(1)}
    for expected in (
        "api/seasons/<str:season>/boards/<str:board>/top",
        "api/seasons/<str:season>/boards/<str:board>/standings",
        "api/match-results",
        "seasons/<int:season_id>/boards/<str:board>",
        "",
        "admin/",
        "admin/dashboard",
        "admin/seasons/season/<path:object_id>/change/",
        "healthz",
        "metrics",
        "metrics.json",
        "api/schema",
        "api/docs",
        "api/redoc",
    ):
        assert expected in routes


def test_a_control_character_in_any_segment_of_any_route_is_a_404(clients) -> None:
    season = make_live_season()
    anonymous, staff = clients
    for _route, path in _paths(season.id):
        for variant in _variants(path, SPOT_CHARACTERS):
            encoded = quote(variant, safe="/")
            _assert_not_found(anonymous.get(encoded), variant)
            if "\x00" in variant:
                _assert_not_found(staff.get(encoded), variant)
                _assert_not_found(anonymous.post(encoded), variant)


def test_every_control_character_is_a_404(clients) -> None:
    season = make_live_season()
    anonymous, _ = clients
    paths = [
        f"/seasons/{season.id}/boards/main",
        f"/api/seasons/{season.id}/boards/main/players/7",
        f"/api/seasons/{season.id}/boards/main/standings",
        "/admin/seasons/season/1/change/",
        "/healthz",
    ]
    for path in paths:
        for character in CONTROL_CHARACTERS:
            variant = path + character
            _assert_not_found(anonymous.get(quote(variant, safe="/")), variant)


def test_a_raw_control_character_is_a_404_too(clients) -> None:
    # A server that lets a raw byte through passes it in PATH_INFO as is (the test client
    # would drop a raw tab or newline while parsing the URL, so PATH_INFO is set directly).
    season = make_live_season()
    anonymous, _ = clients
    for _route, path in _paths(season.id):
        for variant in _variants(path, ["\x00", "\n"]):
            _assert_not_found(anonymous.get("/", PATH_INFO=variant), variant)


@pytest.mark.parametrize(
    "path",
    ["/seasons/{season}/boards/%00", "/api/seasons/{season}/boards/%00/standings"],
)
def test_the_paths_that_reached_postgresql_with_a_nul(clients, path) -> None:
    # These two passed the NUL to a board lookup in SQL (psycopg's DataError, a 500).
    season = make_live_season()
    path = path.format(season=season.id)
    for client in clients:
        _assert_not_found(client.get(path), path)


def test_a_path_without_control_characters_is_served_as_before(client) -> None:
    season = make_live_season()
    assert client.get(f"/seasons/{season.id}").status_code in {200, 503}
    assert client.get("/api/seasons").status_code == 200
    # Percent-encoded text that is not a control character still reaches the views.
    response = client.get(f"/api/seasons/{season.id}/boards/%2500/top")
    assert response.status_code in {400, 404}
    assert "control character" not in response.json()["detail"]
