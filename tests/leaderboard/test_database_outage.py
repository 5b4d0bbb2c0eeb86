"""Reads through a PostgreSQL outage: the board reads (Redis) keep answering from the seasons
and boards each process memoized; the reads that need PostgreSQL answer 503 with Retry-After
and a JSON reason (the HTML pages: a 503 page), never a 500.

The outage is real: the test's database connection goes through a TCP proxy that then refuses
every connection, as a stopped server does. Nothing touches the shared PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from django.db import close_old_connections, connection
from django.test import Client

from seasons.models import SeasonStatus
from tests.helpers import make_season

from ..ingestion.ingest_helpers import TcpProxy
from .board_fixtures import write_daily_board, write_season_board

pytestmark = pytest.mark.django_db(transaction=True)

DAY = datetime(2026, 10, 2, tzinfo=UTC).date()

REDIS_READS = [
    "/api/seasons/{s}/leaderboard/top?limit=3",
    "/api/seasons/{s}/leaderboard/players/3",
    "/api/seasons/{s}/leaderboard/players/3/around?radius=1",
    "/api/seasons/{s}/leaderboard/ranks?start=2&count=3",
    "/api/seasons/{s}/leaderboard/friends?ids=1,2,6",
    "/api/seasons/{s}/leaderboard/daily/2026-10-02/top",
    "/api/seasons/{s}/boards/main/top",
    "/api/seasons/{s}/boards",
]
NEEDS_POSTGRESQL = ["/api/seasons", "/api/seasons/{s}/standings"]


@pytest.fixture
def daily_season(board_redis):
    """An active season with its main board and the DAY daily board in Redis."""
    starts = datetime(2026, 10, 1, tzinfo=UTC)
    season = make_season(
        status=SeasonStatus.ACTIVE, starts_at=starts, ends_at=starts + timedelta(days=30)
    )
    write_season_board(board_redis, season)
    write_daily_board(board_redis, season, DAY, {1: (10, 0), 2: (20, 0)})
    return season


@pytest.fixture
def pg_proxy(settings) -> Iterator[TcpProxy]:
    """The test's database connection, re-pointed through a proxy the test can cut."""
    # Every read reloads its season and board, so a read during the cut really meets the
    # outage (rather than a memo that is simply still fresh).
    settings.LEADERBOARD_SEASON_CACHE_SECONDS = 0
    db = connection.settings_dict
    host, port = db["HOST"], db["PORT"]
    proxy = TcpProxy(int(port or 5432))
    connection.close()
    db["HOST"], db["PORT"] = "127.0.0.1", str(proxy.port)
    try:
        yield proxy
    finally:
        proxy.restore()
        connection.close()
        db["HOST"], db["PORT"] = host, port
        proxy.close()


class ServerClient(Client):
    """The test client, closing a broken database connection after each request as a WSGI
    server does (Django's test client disconnects ``close_old_connections``, so a connection
    the outage broke would otherwise stay broken after PostgreSQL is back)."""

    def __init__(self) -> None:
        super().__init__(raise_request_exception=False)

    def get(self, *args, **kwargs):
        response = super().get(*args, **kwargs)
        close_old_connections()
        return response


def _assert_503(response, *, json_body: bool = True) -> None:
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == "5"
    if json_body:
        assert response["Content-Type"] == "application/json"
        assert response.json() == {
            "detail": "the database is unavailable; retry later",
            "code": "database_unavailable",
        }


def test_board_reads_keep_answering_and_postgresql_reads_are_503(daily_season, pg_proxy) -> None:
    client = ServerClient()
    reads = [path.format(s=daily_season.id) for path in REDIS_READS]
    page = f"/seasons/{daily_season.id}"
    before = {path: client.get(path) for path in reads}
    assert {path: r.status_code for path, r in before.items()} == dict.fromkeys(reads, 200)
    assert client.get(page).status_code == 200

    pg_proxy.cut(refuse=True)
    for path in reads:
        response = client.get(path)
        assert response.status_code == 200, (path, response.content)
        assert response.json() == before[path].json(), path
    page_during = client.get(page)
    assert page_during.status_code == 200
    assert b"Season" in page_during.content

    for path in NEEDS_POSTGRESQL:
        _assert_503(client.get(path.format(s=daily_season.id)))
    # A season this process never resolved cannot be told unknown (404) without PostgreSQL.
    _assert_503(client.get(f"/api/seasons/{daily_season.id + 1000}/leaderboard/top"))
    # The pages that need PostgreSQL: a 503 page, with no trace of the error.
    seasons_page = client.get("/")
    _assert_503(seasons_page, json_body=False)
    assert seasons_page["Content-Type"].startswith("text/html")
    assert b"Traceback" not in seasons_page.content

    pg_proxy.restore()
    assert client.get("/api/seasons").status_code == 200
    assert client.get(reads[0]).status_code == 200


def test_past_the_fallback_a_board_read_is_503_not_500(daily_season, pg_proxy, settings) -> None:
    settings.LEADERBOARD_SEASON_FALLBACK_SECONDS = 0
    client = ServerClient()
    top = f"/api/seasons/{daily_season.id}/leaderboard/top"
    assert client.get(top).status_code == 200
    pg_proxy.cut(refuse=True)
    _assert_503(client.get(top))
    _assert_503(client.get(f"/seasons/{daily_season.id}"), json_body=False)


def test_a_metadata_boards_entries_not_looked_up_yet_need_postgresql_the_rest_answer(
    daily_season, pg_proxy, board_redis
) -> None:
    from leaderboard import keys
    from leaderboard.models import Board
    from leaderboard.selectors.boards import BoardRef
    from leaderboard.services import top_snapshot_refresh

    board = Board.objects.get(season=daily_season, slug="main")
    board.keeps_metadata = True
    board.save(update_fields=["keeps_metadata"])
    ref = BoardRef.from_model(board)
    top_snapshot_refresh(board=ref)
    client = ServerClient()
    top = f"/api/seasons/{daily_season.id}/leaderboard/top"
    player = f"/api/seasons/{daily_season.id}/leaderboard/players/2"
    moved = f"/api/seasons/{daily_season.id}/leaderboard/players/3"
    before = client.get(top)
    assert before["X-Leaderboard-Source"] == "snapshot"
    # No stored result behind these entries (written to Redis directly): metadata null.
    assert before.json()
    assert all(e["metadata"] is None for e in before.json())
    player_before = client.get(player)
    assert player_before.json()["metadata"] is None

    pg_proxy.cut(refuse=True)
    during = client.get(top)
    assert during.status_code == 200
    assert during.json() == before.json()
    # An entry this process looked up answers from its memo; a new score needs PostgreSQL.
    assert client.get(player).json() == player_before.json()
    score = ref.codec.encode(points=777, elapsed_ticks=0)
    board_redis.zadd(keys.board(board_id=ref.id), {"3": score})
    _assert_503(client.get(moved))
