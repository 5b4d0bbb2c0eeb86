"""Reads while Redis cannot serve: 503 with Retry-After and a JSON reason (the HTML pages: a 503
page), never a 500; the reads that need only PostgreSQL keep answering.

The outage is real: the app's boards' Redis (standalone or cluster) and its cache Redis are
re-pointed at a port nothing listens on, as a stopped or restarting server is. The replies a
live Redis gives while it cannot serve (LOADING while it reads its dataset, BUSY behind a long
script, MASTERDOWN, CLUSTERDOWN, TRYAGAIN during a failover) come from a fake server speaking the
Redis protocol: the shared Redis is never stopped or made to load.
"""

from __future__ import annotations

import contextlib
import copy
import socket
import threading
from collections.abc import Callable, Iterator

import pytest
from django.test import Client

from leaderboard import keys
from leaderboard.services import board_mark_intact
from seasons.models import SeasonStatus
from tests.factories import board_factory
from tests.helpers import make_live_season, make_season, mark_intact

from .board_fixtures import write_daily_board, write_season_board

pytestmark = pytest.mark.django_db

REDIS_UNAVAILABLE = {
    "detail": "the boards' Redis is unavailable; retry later",
    "code": "redis_unavailable",
}

# Every read of a board, under both path families (the main board's and /boards/{board}/).
BOARD_READS = [
    "{base}/top?limit=3",
    "{base}/players/3",
    "{base}/players/3/around?radius=1",
    "{base}/ranks?start=2&count=3",
    "{base}/friends?ids=1,2,6",
    "{base}/daily/{day}/top",
    "{base}/weekly/{week}/top",
]
BASES = ["/api/seasons/{s}/leaderboard", "/api/seasons/{s}/boards/main"]
PAGES = [
    "/seasons/{s}",
    "/seasons/{s}/boards/main",
    "/seasons/{s}?start=2",
    "/seasons/{s}?player=3",
    "/seasons/{s}?period=daily",
    "/seasons/{s}?period=weekly",
]


@pytest.fixture
def live_season(board_redis):
    """A season around now, its main and today's daily board in Redis and marked intact."""
    season = make_live_season()
    write_season_board(board_redis, season)
    write_daily_board(board_redis, season, season_today(), {1: (10, 0), 2: (20, 0)})
    mark_intact(season)
    return season


def season_today():
    from django.utils import timezone

    return timezone.now().date()


def paths(season) -> tuple[list[str], list[str]]:
    today = season_today()
    year, week, _ = today.isocalendar()
    reads = [
        read.format(base=base, day=today.isoformat(), week=f"{year:04d}-W{week:02d}").format(
            s=season.id
        )
        for base in BASES
        for read in BOARD_READS
    ]
    reads.append(f"/api/seasons/{season.id}/boards")
    return reads, [page.format(s=season.id) for page in PAGES]


def free_port() -> int:
    """A loopback port nothing listens on (bound, read, released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def point_redis_at(settings) -> Callable[[int], None]:
    """Re-point the app's boards' Redis (standalone: its URL; cluster: its startup nodes) and
    its cache Redis at a port; the ``settings`` fixture puts them back after the test."""

    def point(port: int) -> None:
        caches = copy.deepcopy(settings.CACHES)
        for alias in ("boards", "default"):
            caches[alias]["LOCATION"] = f"redis://127.0.0.1:{port}/0"
        # Short timeouts: a fake server that never answers must not stall the test.
        caches["boards"]["OPTIONS"]["SOCKET_TIMEOUT"] = 2
        settings.CACHES = caches  # Django drops its cache connections on the change
        settings.REDIS_CLUSTER_NODES = [f"127.0.0.1:{port}"]

    return point


def _client() -> Client:
    # A view's uncaught exception becomes the 500 a server would answer, not a test error.
    return Client(raise_request_exception=False)


def _assert_redis_503(response, path: str) -> None:
    assert response.status_code == 503, (path, response.status_code, response.content[:300])
    assert response["Retry-After"] == "5", path
    if path.startswith("/api/"):
        assert response["Content-Type"] == "application/json", path
        assert response.json() == REDIS_UNAVAILABLE, path
    else:
        assert response["Content-Type"].startswith("text/html"), path
        html = response.content.decode()
        assert "The leaderboard is unavailable" in html, path
        assert "Traceback" not in html, path


def test_every_read_and_page_is_503_while_redis_is_unreachable(live_season, point_redis_at) -> None:
    client = _client()
    reads, pages = paths(live_season)
    closed = make_season(status=SeasonStatus.CLOSED)
    # What needs only PostgreSQL: the seasons list, a closed season's standings, the seasons page.
    postgresql_only = ["/api/seasons", f"/api/seasons/{closed.id}/standings", "/"]
    before = {path: client.get(path) for path in [*reads, *pages, *postgresql_only]}
    assert {path: r.status_code for path, r in before.items()} == dict.fromkeys(before, 200)

    point_redis_at(free_port())
    for path in [*reads, *pages]:
        _assert_redis_503(client.get(path), path)
    # The throttle's counter (the cache Redis) fails open: these reads never needed the boards.
    for path in postgresql_only:
        response = client.get(path)
        assert response.status_code == 200, (path, response.content[:300])
        assert response.content == before[path].content, path


@pytest.fixture
def fake_redis() -> Iterator[Callable[[bytes], int]]:
    """Start fake Redis servers that answer every command with one error reply (as a live
    Redis does while it cannot serve); the connection handshake's CLIENT and SELECT get +OK, as
    a loading Redis gives them. Returns the port."""
    servers: list[_FakeRedis] = []

    def start(error: bytes) -> int:
        server = _FakeRedis(error)
        servers.append(server)
        return server.port

    yield start
    for server in servers:
        server.close()


class _FakeRedis:
    def __init__(self, error: bytes) -> None:
        self._error = error
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._closed = threading.Event()
        self._connections: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            self._connections.append(connection)
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        buffer = b""
        try:
            while data := connection.recv(65536):
                buffer += data
                replies = []
                while (parsed := _parse_command(buffer)) is not None:
                    command, buffer = parsed
                    name = command[0].upper() if command else b""
                    replies.append(b"+OK\r\n" if name in (b"CLIENT", b"SELECT") else self._error)
                connection.sendall(b"".join(replies))
        except OSError:
            pass
        finally:
            connection.close()

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        for connection in self._connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


def _parse_command(buffer: bytes) -> tuple[list[bytes], bytes] | None:
    """One RESP command (an array of bulk strings) off the front of ``buffer``, and the rest;
    None until it has arrived whole."""
    if not buffer.startswith(b"*") or b"\r\n" not in buffer:
        return None
    header, rest = buffer.split(b"\r\n", 1)
    parts: list[bytes] = []
    for _ in range(int(header[1:])):
        if b"\r\n" not in rest:
            return None
        length_line, rest = rest.split(b"\r\n", 1)
        length = int(length_line[1:])
        if len(rest) < length + 2:
            return None
        parts.append(rest[:length])
        rest = rest[length + 2 :]
    return parts, rest


@pytest.mark.parametrize(
    "reply",
    [
        b"-LOADING Redis is loading the dataset in memory\r\n",
        b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN "
        b"NOSCRIPT.\r\n",
        b"-MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.\r\n",
        b"-CLUSTERDOWN The cluster is down\r\n",
        b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
    ],
    ids=["loading", "busy", "masterdown", "clusterdown", "tryagain"],
)
def test_a_redis_that_cannot_serve_yet_is_503(
    live_season, fake_redis, point_redis_at, settings, reply
) -> None:
    if settings.LB_REDIS_MODE == "cluster":
        pytest.skip("the fake server speaks standalone Redis, not the cluster's discovery")
    reads, pages = paths(live_season)
    point_redis_at(fake_redis(reply))
    client = _client()
    for path in [*reads, *pages]:
        _assert_redis_503(client.get(path), path)


def test_a_redis_error_that_is_a_bug_stays_a_500(live_season, fake_redis, point_redis_at, settings):
    """Only Redis not serving is a 503: a refused command (a wrong key type, a script error)
    is the code's fault and must not pass for an outage."""
    if settings.LB_REDIS_MODE == "cluster":
        pytest.skip("the fake server speaks standalone Redis, not the cluster's discovery")
    point_redis_at(
        fake_redis(b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n")
    )
    client = _client()
    assert client.get(f"/api/seasons/{live_season.id}/leaderboard/ranks").status_code == 500
    assert client.get(f"/seasons/{live_season.id}?start=2").status_code == 500


# --- the boards list through a board loss ----------------------------------------------------


def test_boards_list_says_size_null_and_recovering_for_a_lost_board(client, board_redis):
    season = make_live_season()
    board_factory(season, "kills")
    write_season_board(board_redis, season)
    mark_intact(season)
    url = f"/api/seasons/{season.id}/boards"

    body = client.get(url).json()
    assert [(b["slug"], b["size"], b["recovering"]) for b in body] == [
        ("main", 7, False),
        ("kills", 0, False),
    ]

    main, kills = (b for b in _boards(season))
    # Redis lost the main board (its intact key with it): its size is not known.
    board_redis.delete(keys.board_intact(board_id=main))
    body = client.get(url).json()
    assert [(b["slug"], b["size"], b["recovering"]) for b in body] == [
        ("main", None, True),
        ("kills", 0, False),
    ]
    # Its reads say the same: 503, being recovered, never the board as it is now.
    top = client.get(f"/api/seasons/{season.id}/boards/main/top")
    assert top.status_code == 503
    assert top["Retry-After"] == "5"
    assert top.json()["code"] == "board_recovering"
    page = client.get(f"/seasons/{season.id}")
    assert page.status_code == 503
    assert page["Retry-After"] == "5"
    assert "The leaderboard is unavailable" in page.content.decode()

    # A recovery holds the board's lock: still recovering, even with the intact key back.
    board_mark_intact(board_id=main)
    board_redis.set(keys.board_recovering(board_id=kills), "rebuild", ex=60)
    body = client.get(url).json()
    assert [(b["slug"], b["size"], b["recovering"]) for b in body] == [
        ("main", 7, False),
        ("kills", None, True),
    ]


def test_a_closed_season_board_reports_its_size_without_an_intact_key(client, board_redis):
    """A closed season's keys are dropped at close-out (no intact key): what Redis has is the
    truth there, as for its reads."""
    season = make_season(status=SeasonStatus.CLOSED)
    body = client.get(f"/api/seasons/{season.id}/boards").json()
    assert [(b["slug"], b["size"], b["recovering"]) for b in body] == [("main", 0, False)]


def _boards(season) -> list[int]:
    from leaderboard.selectors.boards import board_list

    return [board.id for board in board_list(season_id=season.id)]
