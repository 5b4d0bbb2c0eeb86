"""``python manage.py serve_board_stream [--host 127.0.0.1] [--port 8001]``: the board stream
(server-sent events of each board's top list, fed by the rank-events topic) until SIGTERM or
SIGINT. The public pages find it at BOARD_STREAM_URL (docs/events.md, "Live pages")."""

from __future__ import annotations

import asyncio
import signal
from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from leaderboard.board_stream import BoardStreamServer
from leaderboard.management.arguments import PORT_MAX, int_between


class Command(BaseCommand):
    help = "Serve each board's top list as server-sent events, fed by the rank-events topic."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int_between(0, PORT_MAX), default=8001)

    def handle(self, *args: Any, **options: Any) -> None:
        server = BoardStreamServer(
            bootstrap_servers=settings.KAFKA_BOOTSTRAP_SERVERS,
            topic=settings.KAFKA_RANK_EVENTS_TOPIC,
            max_clients=settings.BOARD_STREAM_MAX_CLIENTS,
            max_per_client=settings.BOARD_STREAM_MAX_PER_CLIENT,
            max_seconds=settings.BOARD_STREAM_MAX_SECONDS,
        )
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: server.stopping.set())
        asyncio.run(server.serve(host=options["host"], port=options["port"]))
