"""The public board page over the board stream (server-sent events fed by rank events), in a
real browser: the list moves with no poll while the stream is up, and polls when it is down."""

from __future__ import annotations

import re
import socketserver
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import expect

from tests.helpers import make_season
from tests.leaderboard.board_fixtures import write_season_board
from tests.leaderboard.live import ingest, ingest_with_events
from tests.leaderboard.stream_helpers import StreamThread

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TOP_API = re.compile(r".*/api/seasons/\d+/boards/main/top.*")


@pytest.fixture
def events_topic(settings, kafka_topic_factory) -> str:
    settings.KAFKA_RANK_EVENTS_TOPIC = kafka_topic_factory("rank-events", partitions=2)
    return settings.KAFKA_RANK_EVENTS_TOPIC


@pytest.fixture
def stream(settings, events_topic) -> Iterator[StreamThread]:
    running = StreamThread(events_topic)
    settings.BOARD_STREAM_URL = running.url
    yield running
    running.stop()


def _live_season():
    now = datetime.now(UTC)
    return make_season(
        starts_at=now - timedelta(days=1), ends_at=now + timedelta(days=5), status="active"
    )


def test_the_list_moves_from_the_stream_without_polling(
    page, board_redis, stream, events_topic, screenshot
) -> None:
    season = _live_season()
    write_season_board(board_redis, season)
    polls: list[str] = []

    def count_poll(route) -> None:
        polls.append(route.request.url)
        route.continue_()

    page.route(TOP_API, count_poll)
    page.goto(f"/seasons/{season.id}")
    table = page.locator("table[data-live-url]")
    expect(table).to_have_attribute("data-source", "stream")
    expect(page.locator("#live-status")).to_have_text("Live: streaming updates.")
    polled_before = len(polls)

    ingest_with_events(
        board_redis,
        season,
        player_id=777,
        points=9000,
        at=datetime.now(UTC),
        events_topic=events_topic,
    )
    moved = table.locator('tbody tr[data-player="777"]')
    expect(moved).to_have_class(re.compile(r"\bchanged\b"), timeout=5000)
    expect(moved.locator("td").first).to_have_text("1")
    expect(table.locator("tbody tr")).to_have_count(8)
    # Moved by the stream: no poll since it opened, no reload.
    assert len(polls) == polled_before
    assert page.evaluate("performance.getEntriesByType('navigation').length") == 1
    screenshot("streamed")


def test_the_page_polls_while_the_stream_is_down_and_returns_to_it(
    page, board_redis, stream, events_topic, settings
) -> None:
    season = _live_season()
    write_season_board(board_redis, season)
    page.goto(f"/seasons/{season.id}")
    table = page.locator("table[data-live-url]")
    expect(table).to_have_attribute("data-source", "stream")

    # The stream goes away: the page falls back to polling, and the list still moves.
    stream.stop()
    expect(table).to_have_attribute("data-source", "poll", timeout=5000)
    expect(page.locator("#live-status")).to_have_text("Live: updates every second.")
    ingest(board_redis, season, player_id=778, points=9500, at=datetime.now(UTC))
    expect(table.locator('tbody tr[data-player="778"] td').first).to_have_text("1", timeout=5000)

    # A stream is there again (a restart on another port is what the page retries here):
    # the page goes back to it.
    again = StreamThread(events_topic)
    try:
        page.evaluate(
            "url => document.querySelector('table[data-live-url]')"
            ".setAttribute('data-stream-url', url)",
            f"{again.url}/stream/seasons/{season.id}/boards/main",
        )
        expect(table).to_have_attribute("data-source", "stream", timeout=30000)
    finally:
        again.stop()


def test_without_a_stream_the_page_polls(page, board_redis, settings) -> None:
    settings.BOARD_STREAM_URL = "http://127.0.0.1:9"  # nothing listens there
    season = _live_season()
    write_season_board(board_redis, season)
    page.goto(f"/seasons/{season.id}")
    table = page.locator("table[data-live-url]")
    expect(table).to_have_attribute("data-updated", re.compile(r"\d+"))
    expect(table).to_have_attribute("data-source", "poll")
    ingest(board_redis, season, player_id=779, points=9900, at=datetime.now(UTC))
    expect(table.locator('tbody tr[data-player="779"] td').first).to_have_text("1", timeout=5000)


class _SilentStream:
    """A stream that sends one list, then nothing and never closes: a path that died silently
    (a laptop asleep, a proxy dropping the connection without a word)."""

    def __init__(self) -> None:
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    @staticmethod
    def _handler() -> type[socketserver.StreamRequestHandler]:
        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                while self.rfile.readline() not in (b"\r\n", b""):
                    pass
                self.wfile.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    b"Access-Control-Allow-Origin: *\r\n\r\n"
                    b'event: top\ndata: {"version": 0, "entries": []}\n\n'
                )
                self.wfile.flush()
                self.rfile.read()  # until the page gives up on it

        return Handler

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_stream_gone_silent_is_given_up_for_polling(page, board_redis, settings) -> None:
    silent = _SilentStream()
    settings.BOARD_STREAM_URL = silent.url
    try:
        season = _live_season()
        write_season_board(board_redis, season)
        # Two seconds of silence instead of the page's forty (read as live.js starts).
        page.add_init_script(
            "const read = Element.prototype.getAttribute;"
            "Element.prototype.getAttribute = function (name) {"
            "  return name === 'data-stream-silent-ms' ? '2000' : read.call(this, name); };"
        )
        page.goto(f"/seasons/{season.id}")
        table = page.locator("table[data-live-url]")
        expect(table).to_have_attribute("data-source", "stream", timeout=5000)
        expect(table).to_have_attribute("data-source", "poll", timeout=10000)
        ingest(board_redis, season, player_id=780, points=9900, at=datetime.now(UTC))
        expect(table.locator('tbody tr[data-player="780"] td').first).to_have_text(
            "1", timeout=5000
        )
    finally:
        silent.stop()
