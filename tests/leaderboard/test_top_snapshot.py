"""The top list from the per-second snapshot, and its fallback to the live board."""

from __future__ import annotations

import json

import pytest

from leaderboard import keys
from leaderboard.selectors import top_snapshot_memo_clear
from leaderboard.services import top_snapshot_refresh
from leaderboard.tasks import refresh_top_snapshots
from seasons.models import SeasonStatus
from seasons.selectors import SeasonRef
from tests.helpers import as_board, main_board_id, make_season

from .board_fixtures import entry, write_season_board

pytestmark = pytest.mark.django_db

TOP = [entry(1, 2, 500), entry(2, 1, 500), entry(3, 3, 400)]


@pytest.fixture(autouse=True)
def _fresh_snapshot_memo():
    top_snapshot_memo_clear()
    yield
    top_snapshot_memo_clear()


@pytest.fixture
def season(board_redis):
    season = make_season(status=SeasonStatus.ACTIVE)
    write_season_board(board_redis, season)
    return season


def top(client, season_id, limit=3):
    response = client.get(f"/api/seasons/{season_id}/leaderboard/top?limit={limit}")
    assert response.status_code == 200
    return response


def test_without_the_task_the_top_list_is_read_live(client, season, board_redis):
    assert not board_redis.exists(keys.top_snapshot(board_id=main_board_id(season.id)))
    response = top(client, season.id)
    assert response.json() == TOP
    assert response["X-Leaderboard-Source"] == "live"


def test_with_the_task_the_top_list_comes_from_the_snapshot(client, season, board_redis):
    refreshed = refresh_top_snapshots()
    assert refreshed[main_board_id(season)] == 7
    response = top(client, season.id)
    assert response.json() == TOP
    assert response["X-Leaderboard-Source"] == "snapshot"
    # The process serves its in-memory copy: a new leader shows only after the next refresh
    # (and the next re-read), not per request.
    write_season_board(board_redis, season, {77: (900, 0)})
    assert top(client, season.id).json() == TOP
    refresh_top_snapshots()
    top_snapshot_memo_clear()
    response = top(client, season.id)
    assert response.json()[0] == entry(1, 77, 900)
    assert response["X-Leaderboard-Source"] == "snapshot"


def test_a_stale_snapshot_falls_back_to_the_live_board(client, season, board_redis, settings):
    refresh_top_snapshots()
    write_season_board(board_redis, season, {77: (900, 0)})
    settings.LEADERBOARD_TOP_SNAPSHOT_MAX_AGE_SECONDS = 0
    response = top(client, season.id)
    assert response["X-Leaderboard-Source"] == "live"
    assert response.json()[0] == entry(1, 77, 900)


def test_a_stopped_task_never_yields_an_empty_list(client, season, board_redis):
    refresh_top_snapshots()
    board_redis.delete(keys.top_snapshot(board_id=main_board_id(season.id)))
    top_snapshot_memo_clear()
    response = top(client, season.id)
    assert response.json() == TOP
    assert response["X-Leaderboard-Source"] == "live"


def test_the_snapshot_serves_up_to_1000_entries(client, board_redis):
    season = make_season(status=SeasonStatus.ACTIVE)
    write_season_board(
        board_redis, season, {player: (5000 - player, 0) for player in range(1, 1201)}
    )
    refresh_top_snapshots()
    response = top(client, season.id, limit=1000)
    assert response["X-Leaderboard-Source"] == "snapshot"
    body = response.json()
    assert len(body) == 1000
    assert body[-1] == entry(1000, 1000, 4000)


def test_only_active_seasons_are_refreshed_and_never_mixed(client, board_redis):
    first = make_season(status=SeasonStatus.ACTIVE)
    second = make_season(status=SeasonStatus.ACTIVE)
    closed = make_season(status=SeasonStatus.CLOSED)
    write_season_board(board_redis, first, {1: (10, 0)})
    write_season_board(board_redis, second, {2: (20, 0)})
    write_season_board(board_redis, closed, {3: (30, 0)})
    refreshed = refresh_top_snapshots()
    assert refreshed[main_board_id(first)] == 1
    assert refreshed[main_board_id(second)] == 1
    assert closed.id not in refreshed
    assert top(client, first.id).json() == [entry(1, 1, 10)]
    assert top(client, second.id).json() == [entry(1, 2, 20)]
    assert top(client, closed.id).json() == [entry(1, 3, 30)]
    assert top(client, closed.id)["X-Leaderboard-Source"] == "live"


def test_a_snapshot_of_another_season_under_the_key_is_ignored(client, season, board_redis):
    other = make_season(status=SeasonStatus.ACTIVE)
    write_season_board(board_redis, other, {99: (999, 0)})
    top_snapshot_refresh(board=as_board(SeasonRef.from_model(other)))
    misplaced = board_redis.get(keys.top_snapshot(board_id=main_board_id(other.id)))
    board_redis.set(keys.top_snapshot(board_id=main_board_id(season.id)), misplaced)
    response = top(client, season.id)
    assert response.json() == TOP
    assert response["X-Leaderboard-Source"] == "live"


def test_the_snapshot_is_encoded_once_with_its_generation_time(season, board_redis):
    top_snapshot_refresh(board=as_board(SeasonRef.from_model(season)))
    stored = json.loads(board_redis.get(keys.top_snapshot(board_id=main_board_id(season.id))))
    assert stored["boardId"] == main_board_id(season)
    assert stored["generatedAt"] > 0
    assert stored["entries"][:3] == [[1, 2, 500], [2, 1, 500], [3, 3, 400]]
    assert 0 < board_redis.ttl(keys.top_snapshot(board_id=main_board_id(season.id))) <= 60


def test_snapshot_responses_carry_etag_and_honour_if_none_match(client, season):
    refresh_top_snapshots()
    first = top(client, season.id)
    assert first["X-Leaderboard-Source"] == "snapshot"
    assert first["Cache-Control"] == "max-age=1"
    again = client.get(
        f"/api/seasons/{season.id}/leaderboard/top?limit=3", HTTP_IF_NONE_MATCH=first["ETag"]
    )
    assert again.status_code == 304
    # Same entries, same ETag, whichever path served them.
    top_snapshot_memo_clear()
    refresh_top_snapshots()
    assert top(client, season.id)["ETag"] == first["ETag"]


def test_snapshot_served_top_makes_no_redis_or_sql_round_trip_per_request(
    client, season, django_assert_num_queries, board_redis
):
    refresh_top_snapshots()
    top(client, season.id)
    # Deleting the key shows the process no longer reads Redis for the list within the interval.
    board_redis.delete(keys.top_snapshot(board_id=main_board_id(season.id)))
    with django_assert_num_queries(0):
        response = top(client, season.id)
    assert response["X-Leaderboard-Source"] == "snapshot"
