"""Read a test topic back (the tests of everything that publishes to Kafka)."""

from __future__ import annotations

import time
from collections.abc import Callable

from django.conf import settings
from kafka import KafkaConsumer, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord


def topic_read(
    topic: str,
    bootstrap: list[str] | None = None,
    *,
    count: int | None = None,
    until: Callable[[list[ConsumerRecord]], bool] | None = None,
    timeout: float = 60.0,
) -> list[ConsumerRecord]:
    """The records of ``topic`` from the beginning (``bootstrap``: the configured brokers).

    With ``count`` or ``until``, polls until at least ``count`` records are read or
    ``until(records)`` holds, and returns what was read when ``timeout`` expires, so a test
    asserts on the shortfall. With neither, reads every record published before the call (up
    to the end offsets it finds) and fails if that takes longer than ``timeout``.
    """
    if count is not None and until is not None:
        raise TypeError("topic_read takes count or until, not both")
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap or settings.KAFKA_BOOTSTRAP_SERVERS,
        enable_auto_commit=False,
        group_id=None,
    )
    try:
        partitions = [
            TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))
        ]
        assert partitions, f"topic {topic} has no partitions (does it exist?)"
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        end = consumer.end_offsets(partitions) if count is None and until is None else None

        def done(records: list[ConsumerRecord]) -> bool:
            if count is not None:
                return len(records) >= count
            if until is not None:
                return until(records)
            assert end is not None
            return all(consumer.position(tp) >= end[tp] for tp in partitions)

        records: list[ConsumerRecord] = []
        deadline = time.monotonic() + timeout
        while not done(records):
            if time.monotonic() > deadline:
                assert end is None, f"reading {topic} back took over {timeout:.0f} s"
                break
            for batch in consumer.poll(timeout_ms=200).values():
                records.extend(batch)
        return records
    finally:
        consumer.close()


def topic_size(topic: str, bootstrap: list[str]) -> int:
    """Records ever written to ``topic`` (sum of end offsets): 0 means nothing was published.

    Everything the code under test publishes is acknowledged before it returns, so this is
    exact right after the call, with no waiting.
    """
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        assert partitions, f"topic {topic} has no partitions (does it exist?)"
        return sum(consumer.end_offsets(partitions).values())
    finally:
        consumer.close()
