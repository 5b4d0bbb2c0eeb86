"""The HTTP door: validate a batch exactly as the consumer does, publish it all or nothing."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings
from kafka.errors import KafkaError, KafkaTimeoutError

from ..producer import MatchResultProducer
from ..schema import MatchResultMessage, MessageRejected, message_validate
from .checks import messages_check_boards

logger = logging.getLogger(__name__)

# One POST carries at most this many results: bounded request time and memory per worker.
HTTP_MAX_RESULTS_PER_REQUEST = 1000


@dataclass(frozen=True, slots=True)
class RejectedItem:
    index: int
    code: str
    reason: str
    field: str | None


class MatchResultsRejected(Exception):
    """At least one item is invalid; nothing was published."""

    def __init__(self, rejected: list[RejectedItem]) -> None:
        super().__init__(f"{len(rejected)} invalid result(s)")
        self.rejected = rejected


class MatchResultsUnpublished(Exception):
    """Kafka did not acknowledge the batch; the caller may retry it whole (duplicates are fine)."""


_http_producers: dict[tuple[int, tuple[str, ...]], MatchResultProducer] = {}


def _http_producer() -> MatchResultProducer:
    # One producer per process (and per fork: a producer's I/O thread does not survive fork).
    key = (os.getpid(), tuple(settings.KAFKA_BOOTSTRAP_SERVERS))
    producer = _http_producers.get(key)
    if producer is None:
        producer = _http_producers[key] = MatchResultProducer.from_settings(
            client_id="http-door",
            linger_ms=2,
            # Fail an HTTP request in seconds rather than hold a web worker for a minute.
            max_block_ms=5_000,
            bootstrap_timeout_ms=5_000,
            request_timeout_ms=5_000,
            delivery_timeout_ms=10_000,
        )
    return producer


def match_results_submit(*, items: Sequence[object]) -> int:
    """Validate every item exactly as the consumer does, then publish them all to the topic.

    All or nothing: one invalid item rejects the request (``MatchResultsRejected`` lists each
    bad item's index and reason) and nothing is published. Returns the count acknowledged by
    Kafka; raises ``MatchResultsUnpublished`` when Kafka does not acknowledge in time.
    """
    indices: list[int] = []
    messages: list[MatchResultMessage] = []
    rejected: list[RejectedItem] = []
    for index, item in enumerate(items):
        try:
            messages.append(message_validate(item))
            indices.append(index)
        except MessageRejected as exc:
            rejected.append(RejectedItem(index, exc.code, exc.reason, exc.field))
    for n, rejection in messages_check_boards(messages=messages).rejected:
        rejected.append(RejectedItem(indices[n], rejection.code, rejection.reason, rejection.field))
    if rejected:
        raise MatchResultsRejected(sorted(rejected, key=lambda item: item.index))
    producer = None
    try:
        producer = _http_producer()
        return producer.send_many(
            messages,
            topic=settings.KAFKA_MATCH_RESULTS_TOPIC,
            timeout=10,
        )
    except KafkaError as exc:
        if producer is not None and not isinstance(exc, KafkaTimeoutError):
            # An idempotent producer that met an error it cannot retry (an authorization
            # failure while an ACL was wrong) stays failed for good: every later request would
            # answer 503 though Kafka is back. The next request builds a fresh one.
            _http_producer_drop(producer)
        raise MatchResultsUnpublished(f"Kafka did not acknowledge the results: {exc}") from exc


def _http_producer_drop(producer: MatchResultProducer) -> None:
    for key, cached in list(_http_producers.items()):
        if cached is producer:
            del _http_producers[key]
    try:
        producer.close(timeout=0)
    except Exception:  # closing a failed producer must not hide why it failed
        logger.warning("closing the HTTP door's failed Kafka producer failed", exc_info=True)
