"""The read API against boards built from known inputs: exact JSON for every endpoint."""

from __future__ import annotations

import pytest

from leaderboard.serializers import MAX_FRIENDS
from tests.helpers import make_season, mark_intact

from .board_fixtures import entry, write_season_board

pytestmark = pytest.mark.django_db

FULL_BOARD = [
    entry(1, 2, 500),
    entry(2, 1, 500),
    entry(3, 3, 400),
    entry(4, 5, 300),
    entry(4, 4, 300),
    entry(6, 10, 300),
    entry(7, 6, 100),
]


def board_url(season_id, rest: str) -> str:
    return f"/api/seasons/{season_id}/leaderboard/{rest}"


def get_json(client, url: str, status: int = 200):
    response = client.get(url)
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    return response.json()


# --- top -----------------------------------------------------------------------------------------


def test_top_lists_the_board_by_rank_with_shared_ranks_for_identical_scores(client, season):
    response = client.get(board_url(season.id, "top"))
    assert response.status_code == 200
    assert response.json() == FULL_BOARD
    assert response["Cache-Control"] == "max-age=1"
    assert response["ETag"].startswith('"')


def test_top_limit(client, season):
    assert get_json(client, board_url(season.id, "top?limit=2")) == FULL_BOARD[:2]
    assert get_json(client, board_url(season.id, "top?limit=1000")) == FULL_BOARD


def test_top_of_an_empty_board_is_an_empty_list(client):
    season = make_season()
    mark_intact(season)
    assert get_json(client, board_url(season.id, "top")) == []


@pytest.mark.parametrize("limit", ["0", "1001", "-1", "abc", "1.5", "12.0", "1e3"])
def test_top_rejects_a_malformed_limit(client, season, limit):
    body = get_json(client, board_url(season.id, f"top?limit={limit}"), status=400)
    assert set(body) == {"detail", "errors"}
    assert "limit" in body["errors"]
    assert body["detail"].startswith("limit: ")


def test_top_answers_304_to_a_matching_etag(client, season):
    first = client.get(board_url(season.id, "top"))
    again = client.get(board_url(season.id, "top"), HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 304
    # Read live (no snapshot): the same body under the version of this later read.
    version, _, digest = first["ETag"].strip('"').partition("-")
    assert again["ETag"] == f'"{again["X-Snapshot-Version"]}-{digest}"'
    assert int(again["X-Snapshot-Version"]) > int(version)
    other = client.get(board_url(season.id, "top?limit=1"), HTTP_IF_NONE_MATCH=first["ETag"])
    assert other.status_code == 200


# --- player --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("player", "expected"),
    [
        (2, {**entry(1, 2, 500), "total": 7, "percentile": 100.0, "pointsToNextRank": None}),
        # Equal points reached later: one more point passes player 2.
        (1, {**entry(2, 1, 500), "total": 7, "percentile": 85.71, "pointsToNextRank": 1}),
        # Tied with player 5: the next rank up is player 3's 400.
        (4, {**entry(4, 4, 300), "total": 7, "percentile": 57.14, "pointsToNextRank": 101}),
        (5, {**entry(4, 5, 300), "total": 7, "percentile": 57.14, "pointsToNextRank": 101}),
        (10, {**entry(6, 10, 300), "total": 7, "percentile": 28.57, "pointsToNextRank": 1}),
        (6, {**entry(7, 6, 100), "total": 7, "percentile": 14.29, "pointsToNextRank": 201}),
    ],
)
def test_player_entry(client, season, player, expected):
    assert get_json(client, board_url(season.id, f"players/{player}")) == expected


def test_player_without_a_score_is_404(client, season):
    body = get_json(client, board_url(season.id, "players/999"), status=404)
    assert body == {"detail": f"player 999 has no score in season {season.id}"}


@pytest.mark.parametrize("player", ["abc", "0", "-3", "1.0", "+1", "99999999999999999999"])
def test_player_rejects_a_malformed_id(client, season, player):
    body = get_json(client, board_url(season.id, f"players/{player}"), status=400)
    assert "player" in body["errors"]


# --- around --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("player", "radius", "expected"),
    [
        (3, 1, FULL_BOARD[1:4]),
        (3, 5, FULL_BOARD),
        # At the top edge: nothing above rank 1.
        (2, 2, FULL_BOARD[0:3]),
        # At the bottom edge; the window starts inside a tie and still says rank 4.
        (6, 2, FULL_BOARD[4:7]),
        (4, 0, [entry(4, 4, 300)]),
        (6, 100, FULL_BOARD),
    ],
)
def test_around(client, season, player, radius, expected):
    url = board_url(season.id, f"players/{player}/around?radius={radius}")
    assert get_json(client, url) == expected


def test_around_defaults_to_radius_5(client, board_redis):
    season = make_season()
    write_season_board(board_redis, season, {player: (100 - player, 0) for player in range(1, 21)})
    body = get_json(client, board_url(season.id, "players/10/around"))
    assert [row["playerId"] for row in body] == list(range(5, 16))
    assert [row["rank"] for row in body] == list(range(5, 16))


def test_around_without_a_score_is_an_empty_list(client, season):
    assert get_json(client, board_url(season.id, "players/999/around")) == []


@pytest.mark.parametrize("radius", ["-1", "101", "x", "1.5"])
def test_around_rejects_a_malformed_radius(client, season, radius):
    body = get_json(client, board_url(season.id, f"players/1/around?radius={radius}"), status=400)
    assert "radius" in body["errors"]


# --- ranks ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", FULL_BOARD),
        ("start=1&count=2", FULL_BOARD[:2]),
        ("start=5&count=10", FULL_BOARD[4:]),
        ("start=7&count=1", FULL_BOARD[6:]),
        ("start=8", []),
        ("start=100000&count=1000", []),
    ],
)
def test_ranks_pages(client, season, query, expected):
    assert get_json(client, board_url(season.id, f"ranks?{query}")) == expected


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("start=0", "start"),
        ("start=-1", "start"),
        ("start=a", "start"),
        ("count=0", "count"),
        ("count=1001", "count"),
    ],
)
def test_ranks_rejects_malformed_parameters(client, season, query, field):
    body = get_json(client, board_url(season.id, f"ranks?{query}"), status=400)
    assert field in body["errors"]


# --- friends -------------------------------------------------------------------------------------


def test_friends_are_ranked_globally_and_players_without_a_score_left_out(client, season):
    body = get_json(client, board_url(season.id, "friends?ids=6,1,999,4,5,1"))
    # Identical scores share rank 4 and keep the board's order (as in the top list).
    assert body == [entry(2, 1, 500), entry(4, 5, 300), entry(4, 4, 300), entry(7, 6, 100)]


def test_friends_accepts_200_ids(client, season):
    ids = ",".join(str(player) for player in range(1, MAX_FRIENDS + 1))
    body = get_json(client, board_url(season.id, f"friends?ids={ids}"))
    assert body == FULL_BOARD


def test_friends_with_no_scores_is_an_empty_list(client, season):
    assert get_json(client, board_url(season.id, "friends?ids=998,999")) == []


@pytest.mark.parametrize(
    "ids",
    [
        None,
        "",
        "1,,2",
        "1,a",
        "0",
        "1;2",
        "1.0",
        ",".join(str(player) for player in range(1, MAX_FRIENDS + 2)),
    ],
)
def test_friends_rejects_malformed_ids(client, season, ids):
    url = board_url(season.id, "friends" if ids is None else f"friends?ids={ids}")
    body = get_json(client, url, status=400)
    assert "ids" in body["errors"]


# --- unknown and malformed seasons ---------------------------------------------------------------

ENDPOINTS = [
    "top",
    "players/1",
    "players/1/around",
    "ranks",
    "friends?ids=1",
    "daily/2026-10-02/top",
    "weekly/2026-W41/top",
]


@pytest.mark.parametrize("rest", ENDPOINTS)
def test_unknown_season_is_404(client, rest):
    body = get_json(client, board_url(987654, rest), status=404)
    assert body == {"detail": "season 987654 does not exist"}


@pytest.mark.parametrize("rest", ENDPOINTS)
@pytest.mark.parametrize("season_id", ["abc", "0", "1.0"])
def test_malformed_season_is_400(client, rest, season_id):
    body = get_json(client, board_url(season_id, rest), status=400)
    assert "season" in body["errors"]


def test_no_trailing_slash(client, season):
    body = get_json(client, board_url(season.id, "top/"), status=404)
    assert body == {"detail": f"no such endpoint: /api/seasons/{season.id}/leaderboard/top/"}


def test_unknown_api_path_is_a_json_404(client):
    assert get_json(client, "/api/nope", status=404) == {"detail": "no such endpoint: /api/nope"}
    assert client.get("/no-such-page").status_code == 404


def test_read_endpoints_refuse_writes_with_json(client, season):
    response = client.post(board_url(season.id, "top"))
    assert response.status_code == 405
    assert response.json() == {"detail": 'Method "POST" not allowed.'}


# --- no SQL per request once the season is known ----------------------------------------------


@pytest.mark.parametrize(
    "rest",
    [
        "top",
        "players/1",
        "players/1/around",
        "ranks?start=2&count=3",
        "friends?ids=1,2,3",
        "daily/2026-10-02/top",
    ],
)
def test_hot_endpoints_make_no_sql_query_after_warm_up(
    client, season, rest, django_assert_num_queries
):
    url = board_url(season.id, rest)
    assert client.get(url).status_code == 200
    with django_assert_num_queries(0):
        assert client.get(url).status_code == 200


def test_unknown_seasons_are_memoized_too(client, django_assert_num_queries):
    assert client.get(board_url(424242, "top")).status_code == 404
    with django_assert_num_queries(0):
        assert client.get(board_url(424242, "top")).status_code == 404


# --- throttling ----------------------------------------------------------------------------------


def test_anonymous_clients_are_throttled_with_retry_after(client, season, settings):
    # A day-long window: a minute boundary mid-test would reset the count.
    settings.API_ANON_THROTTLE_RATE = "2/day"
    url = board_url(season.id, "players/1")
    assert client.get(url).status_code == 200
    assert client.get(url).status_code == 200
    response = client.get(url)
    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 86400
    assert "throttled" in response.json()["detail"]
    # Another client (IP) has its own budget.
    assert client.get(url, REMOTE_ADDR="10.1.2.3").status_code == 200


def test_batched_throttle_counts_exactly_at_the_limit(client, season, settings):
    # 300/day syncs with Redis every 3 requests, and always before refusing.
    settings.API_ANON_THROTTLE_RATE = "300/day"
    url = board_url(season.id, "players/1")
    statuses = [client.get(url).status_code for _ in range(305)]
    assert statuses.count(200) == 300
    assert statuses[300:] == [429] * 5


def test_throttle_off(client, season, settings):
    settings.API_ANON_THROTTLE_RATE = "off"
    for _ in range(5):
        assert client.get(board_url(season.id, "top")).status_code == 200
