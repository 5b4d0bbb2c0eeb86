"""A board stream server for tests: in a thread of the test process, on a free port."""

from __future__ import annotations

import asyncio
import threading

from django.conf import settings

from leaderboard.board_stream import BoardStreamServer


class StreamThread:
    """A board stream server on a free port, in a thread with its own event loop."""

    def __init__(
        self,
        topic: str,
        *,
        max_clients: int = 50,
        max_per_client: int = 50,
        max_seconds: float = 60,
    ) -> None:
        self.server = BoardStreamServer(
            bootstrap_servers=settings.KAFKA_BOOTSTRAP_SERVERS,
            topic=topic,
            max_clients=max_clients,
            max_per_client=max_per_client,
            max_seconds=max_seconds,
        )
        ready = threading.Event()
        self.thread = threading.Thread(
            target=lambda: asyncio.run(self.server.serve(host="127.0.0.1", port=0, ready=ready)),
            daemon=True,
        )
        self.thread.start()
        assert ready.wait(10), "the board stream did not start"
        self.url = f"http://127.0.0.1:{self.server.port}"

    def stop(self) -> None:
        self.server.stopping.set()
        self.thread.join(timeout=10)
