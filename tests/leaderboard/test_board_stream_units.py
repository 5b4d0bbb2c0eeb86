"""The board stream's Kafka thread on a fake consumer (a pure unit: librdkafka raising is not
something a local broker does on demand)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from leaderboard import board_stream


class _FailingOnce:
    """consume() raises once, then hands one rank event, then stops the server."""

    def __init__(self, server: board_stream.BoardStreamServer) -> None:
        self.server = server
        self.calls = 0
        self.closed = False

    def list_topics(self, topic: str, timeout: float) -> Any:
        return SimpleNamespace(topics={topic: SimpleNamespace(partitions={0: None})})

    def assign(self, partitions: list[Any]) -> None:
        pass

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        self.calls += 1
        if self.calls == 1:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        self.server.stopping.set()
        event = {"seasonId": 1, "board": "main", "rank": 1, "previousRank": None}
        return [SimpleNamespace(error=lambda: None, value=lambda: json.dumps(event).encode())]

    def close(self) -> None:
        self.closed = True


def test_a_failed_read_of_the_rank_events_is_retried_not_the_end_of_the_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = board_stream.BoardStreamServer(
        bootstrap_servers=["127.0.0.1:1"],
        topic="rank-events",
        max_clients=1,
        max_per_client=1,
        max_seconds=1,
    )
    fake = _FailingOnce(server)
    monkeypatch.setattr(board_stream, "Consumer", lambda config: fake)
    monkeypatch.setattr(server.stopping, "wait", lambda timeout=None: False)
    server._consume()
    assert (fake.calls, server.events_seen, fake.closed) == (2, 1, True)
