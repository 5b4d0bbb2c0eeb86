"""Kafka offsets of the consumer: what to commit after a batch, committing it, and the lag.

Offsets are committed only after the batch is on both sinks (docs/ingestion.md); the commit is
the last step of a batch and the only one a group rebalance can refuse.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from kafka import KafkaConsumer
from kafka.errors import (
    CommitFailedError,
    FencedInstanceIdError,
    IllegalGenerationError,
    KafkaError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from kafka.structs import OffsetAndMetadata, TopicPartition

from .retrying import Retrying

logger = logging.getLogger(__name__)

# Commit errors that mean "the group is rebalancing or has moved on", not "Kafka is down".
_REBALANCING: tuple[type[BaseException], ...] = (
    CommitFailedError,
    RebalanceInProgressError,
    IllegalGenerationError,
    UnknownMemberIdError,
    FencedInstanceIdError,
)


class _CommitSkipped(Exception):
    pass


def next_offsets(polled: Mapping[TopicPartition, Sequence[Any]]) -> dict[TopicPartition, int]:
    """The offsets to commit once a polled batch is handled: one past its last record."""
    return {tp: batch[-1].offset + 1 for tp, batch in polled.items()}


def offsets_commit(
    *, consumer: KafkaConsumer, offsets: Mapping[TopicPartition, int], retrying: Retrying
) -> bool:
    """Commit ``offsets``, waiting through a Kafka outage; False if a rebalance refused them."""

    def commit() -> None:
        try:
            consumer.commit(
                offsets={tp: OffsetAndMetadata(o, "", -1) for tp, o in offsets.items()},
                timeout_ms=10_000,
            )
        except _REBALANCING as exc:
            # Not a dependency outage: the group rebalances, and only the next poll() takes
            # part in it, so retrying here would wait forever. The batch is on both sinks;
            # whoever owns these partitions next starts from the last committed offsets and
            # the exactly-once rule absorbs the replay.
            raise _CommitSkipped(exc) from exc

    try:
        retrying("Kafka (offset commit)", commit)
    except _CommitSkipped as skipped:
        logger.warning("offset commit skipped during a group rebalance: %s", skipped)
        return False
    return True


def owed_offsets_commit(
    *,
    consumer: KafkaConsumer,
    owed: Mapping[TopicPartition, int],
    poll_timeout_ms: int,
    within_seconds: float = 15.0,
) -> dict[TopicPartition, int]:
    """At a graceful stop: commit the batches whose commit a rebalance refused (``owed``:
    partition -> next offset, each batch on both sinks), for the partitions this member still
    owns once the rebalance is done, so that the next owner starts after them rather than read
    them again. Returns what it committed.

    A poll completes the rebalance (only a poll takes part in it); records it returns are left
    unhandled and uncommitted, to be delivered again. A rebalance can take more than one poll
    (the coordinator moved, the group is still joining), so poll and commit are tried again
    until ``within_seconds`` passed. An offset is not committed where the group's committed
    offset is already as far (another member owned the partition meanwhile). Kafka errors are
    logged, not raised: the owed batches are then read again, and the exactly-once rule absorbs
    that."""
    if not owed:
        return {}
    give_up_at = time.monotonic() + within_seconds
    while True:
        try:
            consumer.poll(timeout_ms=poll_timeout_ms, max_records=1)
            mine = consumer.assignment()
            due: dict[TopicPartition, int] = {}
            for tp, offset in owed.items():
                committed = consumer.committed(tp) if tp in mine else None
                if tp in mine and (committed is None or committed < offset):
                    due[tp] = offset
            if due:
                consumer.commit(
                    offsets={tp: OffsetAndMetadata(o, "", -1) for tp, o in due.items()},
                    timeout_ms=10_000,
                )
        except KafkaError as exc:
            left = give_up_at - time.monotonic()
            if left > 0:
                logger.info("offsets a rebalance refused: commit at stop retried: %s", exc)
                time.sleep(min(0.2, left))  # a pause between tries, not a synchronization
                continue
            logger.warning("offsets a rebalance refused stay uncommitted at stop: %s", exc)
            return {}
        return due


def consumer_lag(
    *, consumer: KafkaConsumer, positions: Mapping[int, int], topic: str | None = None
) -> int | None:
    """Sum over the assigned partitions of (high watermark - committed position).

    ``positions`` maps partition -> next offset to read, as this consumer last committed it.
    None when no assigned partition has both figures yet (nothing fetched or committed).
    """
    lags = partition_lags(consumer=consumer, positions=positions, topic=topic)
    return sum(lags.values()) if lags else None


def partition_lags(
    *, consumer: KafkaConsumer, positions: Mapping[int, int], topic: str | None = None
) -> dict[int, int]:
    """partition -> (high watermark - committed position), for each assigned partition (of
    ``topic``, when given: the consumer also reads the profiles) that has both figures (the high
    watermark arrives with the first fetch)."""
    lags: dict[int, int] = {}
    for tp in consumer.assignment():
        if topic is not None and tp.topic != topic:
            continue
        highwater = consumer.highwater(tp)
        position = positions.get(tp.partition)
        if highwater is None or position is None:
            continue
        lags[tp.partition] = max(0, highwater - position)
    return lags
