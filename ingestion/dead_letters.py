"""The dead-letter sink: messages that cannot be applied go to the dead-letter topic.

Each letter keeps the original key and bytes; the reason and the source (topic, partition,
offset) travel in headers (``dead_letter_headers``, docs/ingestion.md). ``publish``
returns only once the broker has acknowledged every letter (``acks=all``), because the batch's
offsets are committed right after: a letter lost there would be a message lost.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Protocol

from kafka import KafkaProducer

from . import metrics
from .records import DeadLetter

logger = logging.getLogger(__name__)


class DeadLetterSink(Protocol):
    def publish(self, *, letters: Sequence[DeadLetter]) -> None:
        """Send every letter and wait until the broker has them all."""


def dead_letter_headers(*, letter: DeadLetter, topic: str) -> list[tuple[str, bytes]]:
    """Headers of a dead letter: why it was rejected, and where it came from."""
    return [
        ("dlq.code", letter.code.encode()),
        # Escaped rather than refused: a reason quoting a sender's text that is not UTF-8
        # must not stop the consumer from setting the message aside.
        ("dlq.reason", letter.reason.encode("utf-8", "backslashreplace")),
        ("dlq.source.topic", topic.encode()),
        ("dlq.source.partition", str(letter.record.partition).encode()),
        ("dlq.source.offset", str(letter.record.offset).encode()),
        ("dlq.rejected_at", datetime.now(UTC).isoformat().encode()),
    ]


def dead_letter_producer(
    *, bootstrap_servers: Sequence[str], client_id: str, reconnect_backoff_max_ms: int
) -> KafkaProducer:
    return KafkaProducer(
        bootstrap_servers=list(bootstrap_servers),
        client_id=client_id,
        acks="all",
        linger_ms=5,
        reconnect_backoff_max_ms=reconnect_backoff_max_ms,
    )


class KafkaDeadLetterSink:
    """``DeadLetterSink`` on a Kafka topic."""

    def __init__(self, *, producer: KafkaProducer, topic: str, source_topic: str) -> None:
        self._producer = producer
        self._topic = topic
        self._source_topic = source_topic

    def publish(self, *, letters: Sequence[DeadLetter]) -> None:
        futures = [
            self._producer.send(
                self._topic,
                key=letter.record.key,
                value=letter.record.value,
                headers=dead_letter_headers(letter=letter, topic=self._source_topic),
            )
            for letter in letters
        ]
        self._producer.flush(timeout=30)
        for future in futures:
            future.get(timeout=30)
        # Counted once acknowledged: a letter that failed to send is sent again with the batch.
        metrics.dead_letters_count(
            topic=self._source_topic, reasons=[letter.code for letter in letters]
        )
        for letter in letters:
            logger.info(
                "dead letter: %s partition %d offset %d: %s",
                self._source_topic,
                letter.record.partition,
                letter.record.offset,
                letter.reason,
            )
