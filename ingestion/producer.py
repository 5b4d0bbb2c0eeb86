"""Publishing match results to Kafka, for game servers (and the HTTP door, and the simulator).

The wire format is the public contract of ``DESIGN.md``: key = the player id as a decimal
string (one player's results stay in order on one partition), value = one UTF-8 JSON object
``{"matchId", "playerId", "seasonId", "points", "achievedAt"}`` with ``achievedAt`` in RFC 3339
with an offset. The input is the schema's frozen ``MatchResultMessage``, so what is published
is exactly what the consumer decodes. Nothing here needs Django configured (``from_settings``
reads settings when called), so a game server can use it on its own::

    with MatchResultProducer(bootstrap_servers=["kafka:9092"], topic="match-results") as p:
        p.send(MatchResultMessage(match_id=uuid4(), player_id=42, season_id=12, points=1518,
                                  achieved_at=datetime.now(UTC)))
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any

from kafka import KafkaProducer

from .schema import MatchResultMessage


def match_result_key(result: MatchResultMessage) -> bytes:
    """The partitioning key: the player id as a decimal string."""
    return str(int(result.player_id)).encode("ascii")


def match_result_value(result: MatchResultMessage) -> bytes:
    """The contract's JSON object, UTF-8."""
    if result.achieved_at.utcoffset() is None:
        # A naive time has no RFC 3339 form; the consumer would dead-letter it.
        raise ValueError("achieved_at must carry a UTC offset")
    return result.to_bytes()


class MatchResultProducer:
    """A ``KafkaProducer`` configured for the match-results contract.

    ``acks="all"`` with the idempotent producer (kafka-python's default, kept explicit): a
    result acknowledged here survives a broker failover, and the producer's own retries do not
    write it twice. Duplicates that remain (a game server re-sending after a timeout) are the
    consumer's job. ``linger_ms``/``batch_size`` trade a few milliseconds of latency for
    batches: at 20,000 results/s sending one request per result would cost a round trip each.
    """

    def __init__(
        self,
        *,
        bootstrap_servers: Sequence[str] | str,
        topic: str,
        linger_ms: int = 5,
        batch_size: int = 128 * 1024,
        compression_type: str | None = None,
        client_id: str = "match-results-producer",
        **kafka_config: Any,
    ) -> None:
        self.topic = topic
        self._producer = KafkaProducer(
            bootstrap_servers=bootstrap_servers,
            client_id=client_id,
            acks="all",
            enable_idempotence=True,
            linger_ms=linger_ms,
            batch_size=batch_size,
            compression_type=compression_type,
            **kafka_config,
        )

    @classmethod
    def from_settings(cls, **overrides: Any) -> MatchResultProducer:
        """Bootstrap servers and topic from Django settings (read now, not at import)."""
        from django.conf import settings

        config: dict[str, Any] = {
            "bootstrap_servers": list(settings.KAFKA_BOOTSTRAP_SERVERS),
            "topic": settings.KAFKA_MATCH_RESULTS_TOPIC,
        }
        config.update(overrides)
        return cls(**config)

    def send(self, result: MatchResultMessage, *, topic: str | None = None) -> Any:
        """Queue one result; returns kafka-python's future (``.get(timeout)`` waits for the ack)."""
        return self.send_raw(
            key=match_result_key(result), value=match_result_value(result), topic=topic
        )

    def send_raw(self, *, key: bytes, value: bytes, topic: str | None = None) -> Any:
        """Queue already-encoded bytes (a retry re-sends exactly what was sent)."""
        return self._producer.send(topic or self.topic, key=key, value=value)

    def send_many(
        self,
        results: Sequence[MatchResultMessage],
        *,
        topic: str | None = None,
        timeout: float = 30,
    ) -> int:
        """Send ``results`` and wait until Kafka acknowledged every one; raises on failure."""
        futures = [self.send(result, topic=topic) for result in results]
        self._producer.flush(timeout=timeout)
        for future in futures:
            future.get(timeout=timeout)
        return len(futures)

    def flush(self, timeout: float | None = None) -> None:
        self._producer.flush(timeout=timeout)

    def close(self, timeout: float | None = None) -> None:
        self._producer.close(timeout=timeout)

    def __enter__(self) -> MatchResultProducer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
