"""The dead-letter sink: messages that cannot be applied go to the dead-letter topic.

Each letter keeps the original key and bytes; the reason and the source (topic, partition,
offset) travel in headers (``dead_letter_headers``, docs/ingestion.md). ``publish``
returns only once the broker has acknowledged every letter (``acks=all``), because the batch's
offsets are committed right after: a letter lost there would be a message lost.

A letter too large to publish (a message that reached the source topic compressed, or that
filled the broker's limit before the headers were added) is published cut: the first
``CUT_VALUE_BYTES`` of its value and ``CUT_KEY_BYTES`` of its key, with headers saying so and
how large the original was. Refused whole, it would be retried forever and hold the partition.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Protocol

from kafka import KafkaProducer
from kafka.errors import MessageSizeTooLargeError
from kafka.producer.future import FutureRecordMetadata

from . import metrics
from .records import DeadLetter

logger = logging.getLogger(__name__)

CUT_VALUE_BYTES = 65_536
CUT_KEY_BYTES = 1_024
# A reason quotes the sender's values; whatever a check quotes, the header stays this small, so
# a letter cut to CUT_VALUE_BYTES always fits under the broker's limit (a megabyte-long header
# made even the cut letter too large, and the consumer retried it for good).
REASON_MAX_BYTES = 1_024


class DeadLetterSink(Protocol):
    def publish(self, *, letters: Sequence[DeadLetter]) -> None:
        """Send every letter and wait until the broker has them all."""


def dead_letter_reason(*, letter: DeadLetter) -> str:
    """The letter's reason, cut to at most REASON_MAX_BYTES once encoded."""
    encoded = letter.reason.encode("utf-8", "backslashreplace")
    if len(encoded) <= REASON_MAX_BYTES:
        return letter.reason
    marker = f"... (cut from {len(encoded)} bytes)"
    # Cut on bytes; "ignore" drops a character the cut split in two.
    return encoded[: REASON_MAX_BYTES - len(marker)].decode("utf-8", "ignore") + marker


def dead_letter_headers(*, letter: DeadLetter, topic: str) -> list[tuple[str, bytes]]:
    """Headers of a dead letter: why it was rejected, and where it came from."""
    return [
        ("dlq.code", letter.code.encode()),
        # Escaped rather than refused: a reason quoting a sender's text that is not UTF-8
        # must not stop the consumer from setting the message aside.
        ("dlq.reason", dead_letter_reason(letter=letter).encode("utf-8", "backslashreplace")),
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
        futures = [self._send(letter) for letter in letters]
        self._producer.flush(timeout=30)
        for letter, future in zip(letters, futures, strict=True):
            try:
                future.get(timeout=30)
            except MessageSizeTooLargeError:
                # The broker's limit (the producer checks its own in send()).
                self._send(letter, cut=True).get(timeout=30)
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
                dead_letter_reason(letter=letter),
            )

    def _send(self, letter: DeadLetter, *, cut: bool = False) -> FutureRecordMetadata:
        key, value = letter.record.key, letter.record.value
        headers = dead_letter_headers(letter=letter, topic=self._source_topic)
        if not cut:
            try:
                return self._producer.send(self._topic, key=key, value=value, headers=headers)
            except MessageSizeTooLargeError:
                pass
        logger.warning(
            "dead letter: %s partition %d offset %d is too large to publish whole (key %d, "
            "value %d bytes): published cut",
            self._source_topic,
            letter.record.partition,
            letter.record.offset,
            len(key or b""),
            len(value or b""),
        )
        headers += [
            ("dlq.cut", b"true"),
            ("dlq.key.bytes", str(len(key or b"")).encode()),
            ("dlq.value.bytes", str(len(value or b"")).encode()),
        ]
        return self._producer.send(
            self._topic,
            key=None if key is None else key[:CUT_KEY_BYTES],
            value=None if value is None else value[:CUT_VALUE_BYTES],
            headers=headers,
        )
