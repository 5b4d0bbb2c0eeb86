"""The latest dead letters, read back from the tail of the dead-letter topic (staff dashboard).

Bounded on every side: at most ``limit`` records per partition are fetched (seeking to
``end - limit``), the read gives up after ``timeout_seconds``, values are cut to a preview,
and no consumer group is joined or committed (the read leaves no trace in Kafka). A topic
that does not exist yet (no letter was ever written) reads as empty.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from kafka import KafkaConsumer, TopicPartition

PREVIEW_CHARS = 200


@dataclass(frozen=True, slots=True)
class DeadLetterView:
    partition: int
    offset: int
    written_at: datetime
    code: str
    reason: str
    source: str  # "<topic>/<partition>@<offset>" of the rejected message, when known
    key: str
    preview: str


def _header(headers: Sequence[tuple[str, bytes]] | None, name: str) -> str:
    for key, value in headers or ():
        if key == name and value is not None:
            return value.decode("utf-8", "replace")
    return ""


def _decode(raw: bytes | None, limit: int) -> str:
    if raw is None:
        return ""
    text = raw[: limit * 4].decode("utf-8", "replace")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def dead_letters_latest(
    *,
    topic: str,
    bootstrap_servers: Sequence[str],
    limit: int = 20,
    timeout_seconds: float = 3.0,
) -> list[DeadLetterView]:
    """The newest ``limit`` letters of ``topic``, newest first. Raises ``kafka.errors.KafkaError``
    when Kafka cannot be reached in time (the caller says so instead of failing the page)."""
    consumer = KafkaConsumer(
        bootstrap_servers=list(bootstrap_servers),
        group_id=None,
        enable_auto_commit=False,
        client_id="dashboard-dlq-tail",
        request_timeout_ms=int(timeout_seconds * 1000) + 1000,
    )
    try:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        if not partitions:
            return []
        ends = consumer.end_offsets(partitions)
        begins = consumer.beginning_offsets(partitions)
        wanted = {tp: end for tp, end in ends.items() if end > begins[tp]}
        if not wanted:
            return []
        consumer.assign(list(wanted))
        for tp, end in wanted.items():
            consumer.seek(tp, max(begins[tp], end - limit))
        records = []
        deadline = time.monotonic() + timeout_seconds
        while wanted and time.monotonic() < deadline:
            for tp, batch in consumer.poll(timeout_ms=200).items():
                records.extend(batch)
                if consumer.position(tp) >= wanted.get(tp, 0):
                    wanted.pop(tp, None)
                    consumer.pause(tp)
    finally:
        consumer.close()
    records.sort(key=lambda r: (r.timestamp, r.partition, r.offset), reverse=True)
    letters = []
    for record in records[:limit]:
        source_topic = _header(record.headers, "dlq.source.topic")
        source = ""
        if source_topic:
            source = (
                f"{source_topic}/{_header(record.headers, 'dlq.source.partition')}"
                f"@{_header(record.headers, 'dlq.source.offset')}"
            )
        letters.append(
            DeadLetterView(
                partition=record.partition,
                offset=record.offset,
                written_at=datetime.fromtimestamp(record.timestamp / 1000, UTC),
                code=_header(record.headers, "dlq.code"),
                reason=_header(record.headers, "dlq.reason"),
                source=source,
                key=_decode(record.key, 40),
                preview=_decode(record.value, PREVIEW_CHARS),
            )
        )
    return letters
