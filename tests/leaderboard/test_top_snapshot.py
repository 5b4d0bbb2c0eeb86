"""The top list from the per-second snapshot, and its fallback to the live board."""

from __future__ import annotations

import json
import random

import pytest

from leaderboard import keys
from leaderboard.selectors import top as top_selectors
from leaderboard.selectors.top import TOP_SNAPSHOT_SIZE, board_top_read, top_snapshot_memo_clear
from leaderboard.selectors.top import TopListStates as TopStates
from leaderboard.services import derived, top_snapshot_refresh
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
    # [rank, player, points, name, country]: these players have no profile.
    assert stored["entries"][:3] == [
        [1, 2, 500, None, None],
        [2, 1, 500, None, None],
        [3, 3, 400, None, None],
    ]
    assert 0 < board_redis.ttl(keys.top_snapshot(board_id=main_board_id(season.id))) <= 60


def version_of(response) -> int:
    return int(response["X-Snapshot-Version"])


def stored_version(board_redis, season) -> int:
    return int(board_redis.get(keys.top_snapshot_version(board_id=main_board_id(season.id))))


def test_snapshot_responses_carry_a_versioned_etag_and_honour_if_none_match(
    client, season, board_redis, settings
):
    # Each request checks the stored version: what the read interval does over time.
    settings.LEADERBOARD_TOP_SNAPSHOT_READ_INTERVAL_SECONDS = 0
    url = f"/api/seasons/{season.id}/leaderboard/top?limit=3"
    refresh_top_snapshots()
    first = top(client, season.id)
    assert first["X-Leaderboard-Source"] == "snapshot"
    assert first["Cache-Control"] == "max-age=1"
    version = version_of(first)
    assert version == stored_version(board_redis, season)
    digest = first["ETag"].removeprefix(f'"{version}-').removesuffix('"')
    assert first["ETag"] == f'"{version}-{digest}"'
    assert digest

    again = client.get(url, HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 304
    assert again["ETag"] == first["ETag"]
    assert version_of(again) == version

    # A refresh that changed nothing: a newer version of the same body, still a 304, which
    # names the new version.
    refresh_top_snapshots()
    unchanged = client.get(url, HTTP_IF_NONE_MATCH=first["ETag"])
    assert unchanged.status_code == 304
    assert version_of(unchanged) > version
    assert unchanged["ETag"] == f'"{version_of(unchanged)}-{digest}"'

    write_season_board(board_redis, season, {77: (900, 0)})
    refresh_top_snapshots()
    changed = client.get(url, HTTP_IF_NONE_MATCH=first["ETag"])
    assert changed.status_code == 200
    assert changed.json()[0] == entry(1, 77, 900)
    assert version_of(changed) > version_of(unchanged)

    # A version no client can have seen (from the future) is ignored: no forced live read.
    future = client.get(url, HTTP_IF_NONE_MATCH='"9999999999999999-0"')
    assert future.status_code == 200
    assert future["X-Leaderboard-Source"] == "snapshot"
    assert version_of(future) == version_of(changed)


def test_versions_strictly_increase_across_refreshes(season, board_redis):
    versions = []
    for points in (600, 700, 700, 800):
        write_season_board(board_redis, season, {77: (points, 0)})
        refresh_top_snapshots()
        body = json.loads(board_redis.get(keys.top_snapshot(board_id=main_board_id(season.id))))
        assert body["version"] == stored_version(board_redis, season)
        versions.append(body["version"])
    # Even a refresh that found the same top (the third) is a new version.
    assert versions == sorted(set(versions))
    assert len(versions) == 4


def test_a_late_refresh_never_replaces_a_newer_snapshot(season, board_redis, monkeypatch):
    board = as_board(SeasonRef.from_model(season))
    snapshot_key = keys.top_snapshot(board_id=board.id)
    # Read first, stored last: a refresh that overlapped a later one, or ran late.
    late = board_top_read(board=board, count=TOP_SNAPSHOT_SIZE)
    write_season_board(board_redis, season, {77: (900, 0)})
    assert top_snapshot_refresh(board=board) == 8
    newer = board_redis.get(snapshot_key)
    monkeypatch.setattr(derived, "board_top_read", lambda **_: late)
    assert top_snapshot_refresh(board=board) == 0
    assert board_redis.get(snapshot_key) == newer
    assert stored_version(board_redis, season) == json.loads(newer)["version"] > late.version


def test_a_board_not_intact_drops_its_snapshot_and_no_late_refresh_brings_it_back(
    client, season, board_redis, monkeypatch
):
    board = as_board(SeasonRef.from_model(season))
    snapshot_key = keys.top_snapshot(board_id=board.id)
    late = board_top_read(board=board, count=TOP_SNAPSHOT_SIZE)
    assert late.intact
    top_snapshot_refresh(board=board)
    board_redis.delete(keys.board_intact(board_id=board.id))
    assert top_snapshot_refresh(board=board) == 0
    assert not board_redis.exists(snapshot_key)
    dropped_at = stored_version(board_redis, season)
    monkeypatch.setattr(derived, "board_top_read", lambda **_: late)
    assert top_snapshot_refresh(board=board) == 0
    assert not board_redis.exists(snapshot_key)
    assert stored_version(board_redis, season) == dropped_at
    # Readers find no snapshot, and the live board's check answers 503.
    top_snapshot_memo_clear()
    response = client.get(f"/api/seasons/{season.id}/leaderboard/top?limit=3")
    assert response.status_code == 503


def test_a_live_list_is_versioned_between_the_snapshots_around_it(
    client, season, board_redis, settings
):
    refresh_top_snapshots()
    first = top(client, season.id)
    assert first["X-Leaderboard-Source"] == "snapshot"
    # The snapshot stale: read live, at a later state of the board than the snapshot's.
    settings.LEADERBOARD_TOP_SNAPSHOT_MAX_AGE_SECONDS = 0
    live = top(client, season.id)
    assert live["X-Leaderboard-Source"] == "live"
    assert version_of(live) > version_of(first)
    assert live["ETag"].startswith(f'"{version_of(live)}-')
    # Fresh again, the held snapshot is older than the live list this process served: never
    # served again.
    settings.LEADERBOARD_TOP_SNAPSHOT_MAX_AGE_SECONDS = 3
    again = top(client, season.id)
    assert again["X-Leaderboard-Source"] == "live"
    assert version_of(again) >= version_of(live)
    # A snapshot taken after the live read is newer, and served (checked at once: the one
    # held is behind what the process served).
    refresh_top_snapshots()
    after = top(client, season.id)
    assert after["X-Leaderboard-Source"] == "snapshot"
    assert version_of(after) > version_of(again)


def test_a_live_list_is_read_once_per_interval_and_the_next_refresh_is_taken_up(
    client, season, board_redis, settings, monkeypatch
):
    """A live list raises what the process serves past the snapshot being written: read on
    every request, one of them nearly always fell between a refresh's read and its pick-up,
    and under load the process read live for good."""
    settings.LEADERBOARD_TOP_SNAPSHOT_READ_INTERVAL_SECONDS = 60
    board = as_board(SeasonRef.from_model(season))
    refresh_top_snapshots()
    assert top(client, season.id)["X-Leaderboard-Source"] == "snapshot"
    settings.LEADERBOARD_TOP_SNAPSHOT_MAX_AGE_SECONDS = 0
    live = top(client, season.id)
    assert live["X-Leaderboard-Source"] == "live"
    settings.LEADERBOARD_TOP_SNAPSHOT_MAX_AGE_SECONDS = 3
    # A refresh reads the board (after the live read)...
    refresh_read = board_top_read(board=board, count=TOP_SNAPSHOT_SIZE)
    assert refresh_read.version > version_of(live)
    # ...and before it is written, requests come: the live list kept, no newer live read.
    reads: list[int] = []
    real_read = top_selectors.board_top_read

    def counted_read(**kwargs):
        reads.append(1)
        return real_read(**kwargs)

    monkeypatch.setattr(top_selectors, "board_top_read", counted_read)
    for limit in (3, 1, 2):  # within the live list kept (a larger limit reads its own)
        during = top(client, season.id, limit=limit)
        assert during["X-Leaderboard-Source"] == "live"
        assert version_of(during) == version_of(live)
    assert reads == []
    # The refresh writes what it read: newer than all served, so it is served.
    monkeypatch.setattr(derived, "board_top_read", lambda **_: refresh_read)
    assert top_snapshot_refresh(board=board) > 0
    after = top(client, season.id)
    assert after["X-Leaderboard-Source"] == "snapshot"
    assert version_of(after) == refresh_read.version
    # A client that has seen a newer live list than the one kept gets a newer one.
    settings.LEADERBOARD_TOP_SNAPSHOT_MAX_AGE_SECONDS = 0
    newer = client.get(
        f"/api/seasons/{season.id}/leaderboard/top?limit=3",
        HTTP_IF_NONE_MATCH=f'"{refresh_read.version + 1}-x"',
    )
    assert newer["X-Leaderboard-Source"] == "live"
    assert version_of(newer) > refresh_read.version
    assert reads == [1]


def test_a_process_behind_the_version_a_client_has_seen_catches_up(
    client, season, board_redis, settings, monkeypatch
):
    # Neither process checks Redis again on its own during the test.
    settings.LEADERBOARD_TOP_SNAPSHOT_READ_INTERVAL_SECONDS = 60
    url = f"/api/seasons/{season.id}/leaderboard/top?limit=3"
    first_process, second_process = TopStates(maxsize=10), TopStates(maxsize=10)
    refresh_top_snapshots()
    monkeypatch.setattr(top_selectors, "_top_states", first_process)
    old = client.get(url)
    write_season_board(board_redis, season, {77: (900, 0)})
    refresh_top_snapshots()
    monkeypatch.setattr(top_selectors, "_top_states", second_process)
    new = client.get(url)
    assert version_of(new) > version_of(old)
    assert new.json()[0] == entry(1, 77, 900)

    monkeypatch.setattr(top_selectors, "_top_states", first_process)
    # Without the client's word, the first process may still serve the version it holds...
    assert version_of(client.get(url)) == version_of(old)
    # ...but not to a client that has seen a newer one: it checks Redis at once, and its body
    # is the one the client holds.
    caught_up = client.get(url, HTTP_IF_NONE_MATCH=new["ETag"])
    assert caught_up.status_code == 304
    assert version_of(caught_up) == version_of(new)
    # And once it has seen it, it serves nothing older to anyone.
    assert version_of(client.get(url)) == version_of(new)


def test_processes_stay_within_one_version_and_a_client_never_goes_backwards(
    client, season, board_redis, settings, monkeypatch
):
    """Two processes, refreshes once a (simulated) second, each process checking Redis once
    per second as its read interval says: at any read each is at most one version behind the
    newest stored, and one client whose requests alternate between them, sending its last
    ETag, sees its cumulative player's points and the versions only go up."""
    settings.LEADERBOARD_TOP_SNAPSHOT_READ_INTERVAL_SECONDS = 1.0
    url = f"/api/seasons/{season.id}/leaderboard/top?limit=3"
    now = [1000.0]
    processes = [TopStates(maxsize=10, clock=lambda: now[0]) for _ in range(2)]
    rng = random.Random(7)
    stored: list[int] = []
    client_etag, client_version, client_points = None, 0, 0
    behind_seen = 0
    for second in range(1, 41):
        now[0] = 1000.0 + second
        write_season_board(board_redis, season, {77: (1000 + second, 0)})
        refresh_top_snapshots()
        stored.append(stored_version(board_redis, season))
        for offset in sorted(rng.uniform(0.05, 0.95) for _ in range(6)):
            now[0] = 1000.0 + second + offset
            process = rng.choice(processes)
            monkeypatch.setattr(top_selectors, "_top_states", process)
            # Another client, who sends nothing: the process serves what it holds.
            anyone = client.get(url)
            assert stored.index(version_of(anyone)) >= len(stored) - 2
            behind_seen += stored.index(version_of(anyone)) == len(stored) - 2
            # The client, with its last ETag.
            headers: dict[str, str] = {"HTTP_IF_NONE_MATCH": client_etag} if client_etag else {}
            mine = client.get(url, **headers)
            assert version_of(mine) >= client_version
            client_version, client_etag = version_of(mine), mine["ETag"]
            if mine.status_code == 200:
                (leader,) = [e for e in mine.json() if e["playerId"] == 77]
                assert leader["points"] >= client_points
                client_points = leader["points"]
    # The run did put a process a version behind the other (the case under test).
    assert behind_seen > 0
    assert client_points == 1040


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
