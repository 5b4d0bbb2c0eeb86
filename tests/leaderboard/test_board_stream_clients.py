"""A stream's client that stops reading (a frozen tab, a client holding its window shut) is
let go: its slot is freed and its connection dropped, whatever the stream's own length."""

from __future__ import annotations

import asyncio
import threading
from typing import Any
from unittest import mock

from leaderboard import board_stream
from leaderboard.board_stream import BoardStreamServer


class _NotReadingWriter:
    """A StreamWriter whose client takes nothing: drain() never returns."""

    def __init__(self) -> None:
        self.transport = mock.Mock()
        self.written = 0

    def write(self, data: bytes) -> None:
        self.written += len(data)

    async def drain(self) -> None:
        await asyncio.Event().wait()

    def close(self) -> None:
        pass


def _run_catching(coroutine: Any, failed: list[BaseException]) -> None:
    try:
        asyncio.run(coroutine())
    except BaseException as exc:  # reported by the test's own thread
        failed.append(exc)


def test_a_client_that_stops_reading_frees_its_slot(monkeypatch) -> None:
    monkeypatch.setattr(board_stream, "DRAIN_SECONDS", 0.2)
    server = BoardStreamServer(
        bootstrap_servers=[], topic="t", max_clients=1, max_per_client=1, max_seconds=3600
    )
    writer = _NotReadingWriter()
    board: Any = object()

    async def run() -> None:
        server._wake = asyncio.Event()
        # Far past DRAIN_SECONDS, far short of the stream's hour.
        streaming = server._stream(writer, (1, "main"), board, client="192.0.2.1")  # type: ignore[arg-type]
        await asyncio.wait_for(streaming, timeout=10)

    # In a thread of its own: a browser test before this one may leave a loop running here.
    failed: list[BaseException] = []
    thread = threading.Thread(target=lambda: _run_catching(run, failed))
    thread.start()
    thread.join(30)
    assert not thread.is_alive()
    assert not failed, failed
    assert writer.written > 0
    assert server.clients == 0
    assert server.boards == {}
    assert server.per_client == {}
    writer.transport.abort.assert_called_once()
