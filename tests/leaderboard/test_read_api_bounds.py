"""Every numeric parameter of the read API is bounded by what the code can serve: a value past
the bound is a JSON 400 naming the parameter, never a 500 from Redis, Lua or int()."""

from __future__ import annotations

import pytest

from leaderboard.serializers import MAX_START

pytestmark = pytest.mark.django_db

HUGE = "9" * 5000  # past Python's 4,300-digit int() limit


def board_url(season_id: object, rest: str) -> str:
    return f"/api/seasons/{season_id}/leaderboard/{rest}"


def assert_400_naming(response, field: str) -> None:
    assert response.status_code == 400, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert field in body["errors"], body
    assert body["detail"]


@pytest.mark.parametrize(
    "query",
    [
        f"start={2**63 - 1}",
        f"start={2**63 - 1000}&count=1000",
        f"start={MAX_START + 1}",
        f"start={2**53}&count=1",
        f"start={HUGE}",
    ],
)
def test_ranks_start_past_the_exact_range_is_400(client, season, query):
    assert_400_naming(client.get(board_url(season.id, f"ranks?{query}")), "start")


def test_ranks_at_the_deepest_start_is_an_empty_page(client, season):
    response = client.get(board_url(season.id, f"ranks?start={MAX_START}&count=1000"))
    assert response.status_code == 200, response.content
    assert response.json() == []


@pytest.mark.parametrize(
    ("rest", "field"),
    [
        (f"players/{2**63}", "player"),
        (f"players/{HUGE}", "player"),
        (f"players/{HUGE}/around", "player"),
        (f"players/1/around?radius={HUGE}", "radius"),
        (f"players/1/around?radius={2**63}", "radius"),
        (f"top?limit={HUGE}", "limit"),
        (f"top?limit={2**63}", "limit"),
        (f"ranks?count={2**63}", "count"),
        (f"friends?ids=1,{2**63}", "ids"),
        (f"friends?ids=1,{HUGE}", "ids"),
        (f"daily/2026-10-02/top?limit={2**63}", "limit"),
        # The week's Sunday is in year 10000: building its board overflowed.
        ("weekly/9999-W52/top", "week"),
        # The day's board ends at the next midnight, in year 10000.
        ("daily/9999-12-31/top", "day"),
        # date.fromisoformat takes each of these for a day; the contract's format is YYYY-MM-DD.
        ("daily/20261012xx/top", "day"),
        ("daily/2026101299/top", "day"),
        ("daily/2026-W41-1/top", "day"),
    ],
)
def test_oversized_parameters_are_400(client, season, rest, field):
    assert_400_naming(client.get(board_url(season.id, rest)), field)


@pytest.mark.parametrize("rest", ["top", "players/1", "ranks", "friends?ids=1"])
def test_oversized_season_id_is_400(client, rest):
    assert_400_naming(client.get(board_url(HUGE, rest)), "season")


def test_page_lookup_of_an_oversized_player_id_is_a_400_page(client, season):
    response = client.get(f"/seasons/{season.id}?player={HUGE}")
    assert response.status_code == 400
    assert "is not a player id" in response.content.decode()


@pytest.mark.parametrize("rest", ["top", "daily/2026-10-02/top", "weekly/2026-W40/top"])
def test_a_tag_whose_version_is_not_ascii_digits_is_ignored(client, season, rest):
    # "\u00b2" (the byte 0xB2 of a header, as WSGI decodes it) is a digit to str.isdigit() and not
    # to int(): it was a 500.
    for tag in ('"\u00b2-abc"', '"\u00b9\u00b9-abc", W/"12-x"'):
        response = client.get(board_url(season.id, rest), headers={"If-None-Match": tag})
        assert response.status_code == 200, response.content
