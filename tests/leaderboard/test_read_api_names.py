"""Names on every entry of every read: displayName and country from the name cache, null when
unknown or hidden, a hide showing within 5 seconds (the top list's snapshot included)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone
from redis.exceptions import ResponseError

from leaderboard import keys
from leaderboard.player_names import NamesRead, player_names_recover
from leaderboard.scripts import Command
from leaderboard.selectors import rankings
from leaderboard.selectors.top import top_snapshot_memo_clear
from leaderboard.services import top_snapshot_refresh
from players.schema import ProfileUpdate
from players.services import player_profile_hide, player_profile_unhide, player_profiles_upsert
from seasons.models import SeasonStatus
from tests.helpers import main_board, make_season, wait_until

from .board_fixtures import entry, write_daily_board

pytestmark = pytest.mark.django_db(transaction=True)

AT = datetime(2026, 1, 1, tzinfo=UTC)
# KNOWN_BOARD ranks 2, 1, 3, 5, 4, 10, 6; players 4, 5, 10 and 6 have no profile.
PROFILES = [
    ProfileUpdate(2, "Alice", "FR", None, AT),
    ProfileUpdate(1, "Bob", None, None, AT),
    ProfileUpdate(3, "Çelik", "TR", None, AT),
]
NAMED_TOP = [
    entry(1, 2, 500, "Alice", "FR"),
    entry(2, 1, 500, "Bob"),
    entry(3, 3, 400, "Çelik", "TR"),
    entry(4, 5, 300),
    entry(4, 4, 300),
    entry(6, 10, 300),
    entry(7, 6, 100),
]


@pytest.fixture(autouse=True)
def _fresh_snapshot_memo() -> Iterator[None]:
    top_snapshot_memo_clear()
    yield
    top_snapshot_memo_clear()


@pytest.fixture
def named(season):
    player_profiles_upsert(profiles=PROFILES)
    return season


def url(season_id: int, rest: str) -> str:
    return f"/api/seasons/{season_id}/leaderboard/{rest}"


def get_json(client, path: str):
    response = client.get(path)
    assert response.status_code == 200, response.content
    return response.json()


def names_of(entries) -> list[tuple[int, str | None, str | None]]:
    return [(e["playerId"], e["displayName"], e["country"]) for e in entries]


def test_top_read_live_carries_the_names(client, named):
    response = client.get(url(named.id, "top"))
    assert response["X-Leaderboard-Source"] == "live"
    assert response.json() == NAMED_TOP


def test_top_from_the_snapshot_carries_the_names_stored_in_it(client, named, board_redis):
    top_snapshot_refresh(board=main_board(named))
    response = client.get(url(named.id, "top"))
    assert response["X-Leaderboard-Source"] == "snapshot"
    assert response.json() == NAMED_TOP


def test_ranks_player_around_friends_carry_the_names(client, named):
    assert get_json(client, url(named.id, "ranks?start=2&count=2")) == NAMED_TOP[1:3]
    player = get_json(client, url(named.id, "players/2"))
    assert (player["displayName"], player["country"]) == ("Alice", "FR")
    unknown = get_json(client, url(named.id, "players/6"))
    assert (unknown["displayName"], unknown["country"]) == (None, None)
    assert get_json(client, url(named.id, "players/1/around?radius=1")) == NAMED_TOP[0:3]
    friends = get_json(client, url(named.id, "friends?ids=6,3,2,999"))
    assert names_of(friends) == [(2, "Alice", "FR"), (3, "Çelik", "TR"), (6, None, None)]


def test_daily_and_weekly_carry_the_names(client, board_redis):
    today = timezone.now().date()
    monday = today - timedelta(days=today.weekday() + 14)
    starts = datetime.combine(monday - timedelta(days=14), datetime.min.time(), tzinfo=UTC)
    season = make_season(
        status=SeasonStatus.ACTIVE, starts_at=starts, ends_at=starts + timedelta(days=90)
    )
    player_profiles_upsert(profiles=PROFILES)
    write_daily_board(board_redis, season, monday, {1: (100, 10), 2: (150, 20), 7: (5, 1)})
    daily = get_json(client, url(season.id, f"daily/{monday.isoformat()}/top"))
    assert names_of(daily) == [(2, "Alice", "FR"), (1, "Bob", None), (7, None, None)]
    year, week, _ = monday.isocalendar()
    weekly = get_json(client, url(season.id, f"weekly/{year}-W{week:02d}/top"))
    assert names_of(weekly) == names_of(daily)


def test_the_named_board_pages_under_the_boards_path_too(client, named):
    body = get_json(client, f"/api/seasons/{named.id}/boards/main/ranks?count=1")
    assert body == NAMED_TOP[:1]


class _Beat:
    """The top snapshot's refresh every ``period`` seconds, as beat runs it, in a thread."""

    def __init__(self, season, period: float = 1.0) -> None:
        self._board = main_board(season)
        self._period = period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            top_snapshot_refresh(board=self._board)
            self._stop.wait(self._period)

    def __enter__(self) -> _Beat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def test_a_hide_reads_null_everywhere_within_5_seconds(client, named):
    with _Beat(named):
        wait_until(lambda: client.get(url(named.id, "top"))["X-Leaderboard-Source"] == "snapshot")
        assert get_json(client, url(named.id, "top"))[0]["displayName"] == "Alice"
        player_profile_hide(player_id=2)

        def hidden_on_top() -> bool:
            response = client.get(url(named.id, "top"))
            first = response.json()[0]
            return response["X-Leaderboard-Source"] == "snapshot" and first["displayName"] is None

        # The scores did not move: the refresh still rewrites the snapshot with the new name.
        wait_until(hidden_on_top, timeout=5.0, every=0.05)
        # The country stays with a hidden name (as on the player card).
        assert names_of(get_json(client, url(named.id, "top")))[0] == (2, None, "FR")
        # The other reads join the cache, written through as the hide commits: at once.
        assert get_json(client, url(named.id, "players/2"))["displayName"] is None
        for rest in ("ranks?count=1", "players/1/around?radius=1", "friends?ids=2"):
            assert get_json(client, url(named.id, rest))[0]["displayName"] is None, rest
        player_profile_unhide(player_id=2)
        wait_until(
            lambda: get_json(client, url(named.id, "top"))[0]["displayName"] == "Alice",
            timeout=5.0,
            every=0.05,
        )


def test_a_rename_reaches_the_snapshot_without_a_score_change(client, named):
    with _Beat(named):
        wait_until(lambda: client.get(url(named.id, "top"))["X-Leaderboard-Source"] == "snapshot")
        later = AT + timedelta(hours=1)
        player_profiles_upsert(profiles=[ProfileUpdate(6, "Latecomer", "JP", None, later)])
        wait_until(
            lambda: get_json(client, url(named.id, "top"))[-1]["displayName"] == "Latecomer",
            timeout=5.0,
            every=0.05,
        )
        assert get_json(client, url(named.id, "top"))[-1] == entry(7, 6, 100, "Latecomer", "JP")


def test_a_lost_name_cache_reads_null_names_not_a_503_until_rebuilt(client, named, board_redis):
    for player_id in (1, 2, 3):
        board_redis.delete(keys.player_names(player_id=player_id))
    board_redis.delete(keys.player_names_intact())
    # The boards are intact: every read answers, with null names meanwhile.
    response = client.get(url(named.id, "top"))
    assert response.status_code == 200
    assert response.json() == [{**e, "displayName": None, "country": None} for e in NAMED_TOP]
    assert get_json(client, url(named.id, "players/2"))["displayName"] is None
    # The recovery refills the cache from PostgreSQL.
    assert player_names_recover() == len(PROFILES)
    assert get_json(client, url(named.id, "players/2"))["displayName"] == "Alice"
    assert client.get(url(named.id, "top")).json() == NAMED_TOP


def _names_failing(monkeypatch, error: str) -> None:
    """The name cache's calls replaced by one whose reply is ``error``: a names read that fails
    while the board's script (in the same pipeline on a single Redis) answers."""
    failing = NamesRead(
        calls=(
            Command(
                ("EVAL", f"return redis.error_reply('{error}')", 1, keys.player_names(player_id=2))
            ),
        ),
        players=((),),
    )
    monkeypatch.setattr(rankings, "player_names_read", lambda **kwargs: failing)


def test_friends_answer_without_names_when_only_the_names_fail(client, named, monkeypatch):
    _names_failing(monkeypatch, "BUSY a script is running")
    friends = get_json(client, url(named.id, "friends?ids=6,3,2,999"))
    assert names_of(friends) == [(2, None, None), (3, None, None), (6, None, None)]
    assert [e["rank"] for e in friends] == [1, 3, 7]


def test_a_names_error_that_is_a_bug_is_not_hidden(named, monkeypatch):
    _names_failing(monkeypatch, "ERR something else")
    with pytest.raises(ResponseError, match="something else"):
        rankings.board_friends_get(board=main_board(named), player_ids=[2, 3])


def test_an_old_snapshot_without_names_still_serves(client, season, board_redis):
    """A snapshot written before names were stored (three-field rows) reads with null names."""
    import json
    import time

    board = main_board(season)
    body = {"boardId": board.id, "generatedAt": time.time(), "version": 1, "entries": [[1, 2, 500]]}
    board_redis.set(keys.top_snapshot(board_id=board.id), json.dumps(body))
    board_redis.set(keys.top_snapshot_version(board_id=board.id), 1)
    response = client.get(url(season.id, "top?limit=1"))
    assert response["X-Leaderboard-Source"] == "snapshot"
    assert response.json() == [entry(1, 2, 500)]
