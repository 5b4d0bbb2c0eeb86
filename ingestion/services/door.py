"""The HTTP door: validate a batch exactly as the consumer does, publish it all or nothing."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings
from kafka.errors import KafkaError

from ..producer import MatchResultProducer
from ..schema import MatchResultMessage, MessageRejected, message_validate
from .checks import messages_check_boards

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
    try:
        return _http_producer().send_many(
            messages,
            topic=settings.KAFKA_MATCH_RESULTS_TOPIC,
            timeout=10,
        )
    except KafkaError as exc:
        raise MatchResultsUnpublished(f"Kafka did not acknowledge the results: {exc}") from exc
