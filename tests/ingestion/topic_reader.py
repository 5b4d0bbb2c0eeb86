"""Read a test topic back (the tests of everything that publishes to Kafka)."""

from __future__ import annotations

import time
from collections.abc import Callable

from kafka import KafkaConsumer
from kafka.consumer.fetcher import ConsumerRecord


def topic_read(
    topic: str,
    bootstrap: list[str],
    *,
    until: Callable[[list[ConsumerRecord]], bool],
    timeout: float = 60.0,
) -> list[ConsumerRecord]:
    """Every record of ``topic`` from the beginning, polling until ``until(records)`` holds.

    Returns what was read when ``timeout`` expires, so a test asserts on the shortfall.
    """
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        group_id=None,
    )
    records: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and not until(records):
            for batch in consumer.poll(timeout_ms=200).values():
                records.extend(batch)
    finally:
        consumer.close()
    return records


def topic_read_count(topic: str, bootstrap: list[str], count: int, **kwargs) -> list:
    return topic_read(topic, bootstrap, until=lambda records: len(records) >= count, **kwargs)


def topic_size(topic: str, bootstrap: list[str]) -> int:
    """Records ever written to ``topic`` (sum of end offsets): 0 means nothing was published.

    Everything the code under test publishes is acknowledged before it returns, so this is
    exact right after the call, with no waiting.
    """
    from kafka import TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        assert partitions, f"topic {topic} has no partitions (does it exist?)"
        return sum(consumer.end_offsets(partitions).values())
    finally:
        consumer.close()
