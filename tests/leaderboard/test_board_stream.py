"""The board stream server over plain HTTP: the current list at once, a new one after a rank
event touches the top, 404 for an unknown board, 503 past its stream limit, and a stream that
ends after its time (the browser reconnects)."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from leaderboard import board_stream
from seasons.models import SeasonStatus
from tests.helpers import make_season
from tests.leaderboard.board_fixtures import write_season_board
from tests.leaderboard.live import ingest_with_events
from tests.leaderboard.stream_helpers import StreamThread

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def events_topic(settings, kafka_topic_factory) -> str:
    settings.KAFKA_RANK_EVENTS_TOPIC = kafka_topic_factory("rank-events", partitions=2)
    return settings.KAFKA_RANK_EVENTS_TOPIC


@pytest.fixture
def stream(events_topic) -> Iterator[StreamThread]:
    running = StreamThread(events_topic, max_clients=1, max_seconds=8)
    yield running
    running.stop()


def _open(stream: StreamThread, path: str) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", stream.server.port, timeout=10)
    connection.request("GET", path)
    return connection.getresponse()


def _messages(response: http.client.HTTPResponse, *, until: float) -> Iterator[dict[str, Any]]:
    """The stream's messages as {"event", "data"} until the stream ends or ``until``."""
    event: dict[str, Any] = {}
    while time.monotonic() < until:
        line = response.readline()
        if not line:
            return
        text = line.decode().rstrip("\n")
        if not text:
            if "event" in event:
                yield event
            event = {}
        elif text.startswith("event: "):
            event["event"] = text[7:]
        elif text.startswith("data: "):
            event["data"] = json.loads(text[6:])


def _live_season():
    now = datetime.now(UTC)
    return make_season(
        starts_at=now - timedelta(days=1),
        ends_at=now + timedelta(days=5),
        status=SeasonStatus.ACTIVE,
    )


def test_a_stream_sends_the_list_then_each_change_of_the_top(
    board_redis, stream, events_topic
) -> None:
    season = _live_season()
    write_season_board(board_redis, season)
    response = _open(stream, f"/stream/seasons/{season.id}/boards/main")
    assert response.status == 200
    assert response.getheader("Content-Type") == "text/event-stream"
    messages = _messages(response, until=time.monotonic() + 20)
    first = next(messages)
    assert first["event"] == "top"
    assert [e["playerId"] for e in first["data"]["entries"]][:1] == [2]

    # Only one stream at a time here: the next one is refused, and its page polls.
    refused = _open(stream, f"/stream/seasons/{season.id}/boards/main")
    assert (refused.status, refused.getheader("Retry-After")) == (503, "30")

    ingest_with_events(
        board_redis,
        season,
        player_id=777,
        points=9000,
        at=datetime.now(UTC),
        events_topic=events_topic,
    )
    moved = next(m for m in messages if m["event"] == "top")
    assert moved["data"]["entries"][0]["playerId"] == 777
    assert moved["data"]["version"] > first["data"]["version"]
    # The stream ends after its time (8 s here), and the browser reconnects.
    assert list(_messages(response, until=time.monotonic() + 20)) == []


def test_unknown_boards_and_paths(stream) -> None:
    assert _open(stream, "/stream/seasons/999999/boards/main").status == 404
    assert _open(stream, "/elsewhere").status == 404
    assert _open(stream, "/healthz").status == 200


def _open_as(stream: StreamThread, path: str, forwarded_for: str) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", stream.server.port, timeout=10)
    connection.request("GET", path, headers={"X-Forwarded-For": forwarded_for})
    return connection.getresponse()


def test_one_client_cannot_take_every_stream(
    board_redis, events_topic, settings, monkeypatch
) -> None:
    """Past BOARD_STREAM_MAX_PER_CLIENT a client's next stream is refused (its page polls),
    while another client still gets one; behind a trusted proxy each client is the address the
    proxy saw, and a stream that ends frees its client's slot."""
    settings.API_TRUSTED_PROXY_COUNT = 1
    # A closed stream is noticed at its next writes: heartbeats close together here.
    monkeypatch.setattr(board_stream, "HEARTBEAT_SECONDS", 0.2)
    season = _live_season()
    write_season_board(board_redis, season)
    path = f"/stream/seasons/{season.id}/boards/main"
    running = StreamThread(events_topic, max_clients=10, max_per_client=2, max_seconds=30)
    try:
        mine = [_open_as(running, path, "198.51.100.7") for _ in range(2)]
        assert [r.status for r in mine] == [200, 200]
        # The client's own words left of the proxy's entry change nothing.
        refused = _open_as(running, path, "203.0.113.99, 198.51.100.7")
        assert (refused.status, refused.getheader("Retry-After")) == (503, "30")
        assert b"from this client" in refused.read()
        other = _open_as(running, path, "198.51.100.8")
        assert other.status == 200
        assert running.server.per_client == {"198.51.100.7": 2, "198.51.100.8": 1}

        mine[0].close()
        deadline = time.monotonic() + 30
        while running.server.per_client.get("198.51.100.7") != 1:
            assert time.monotonic() < deadline, running.server.per_client
            time.sleep(0.05)
        assert _open_as(running, path, "198.51.100.7").status == 200
    finally:
        running.stop()


def test_a_new_stream_brings_the_board_as_it_is_now(board_redis, events_topic) -> None:
    """The first client's board was kept while anyone watched: staff's later options (attempts
    shown) never reached the stream, and after the season closed it answered unavailable."""
    from leaderboard.models import Board
    from seasons.memo import process_memos_clear

    season = _live_season()
    write_season_board(board_redis, season)
    running = StreamThread(events_topic, max_clients=2, max_seconds=20)
    try:
        path = f"/stream/seasons/{season.id}/boards/main"
        first = _messages(_open(running, path), until=time.monotonic() + 20)
        assert "attempts" not in next(first)["data"]["entries"][0]
        Board.objects.filter(season=season, slug="main").update(max_attempts=5)
        process_memos_clear()
        second = _messages(_open(running, path), until=time.monotonic() + 20)
        assert next(second)["event"] == "top"  # what the board was sent last, at once
        # Then the board as it is now, to every client of it.
        renewed = next(m for m in first if m["event"] == "top")
        assert renewed["data"]["entries"][0]["attempts"] is not None
        [watched] = running.server.boards.values()
        assert watched.board.max_attempts == 5
    finally:
        running.stop()
