"""The consumer's watch on the boards' Redis: a failover or restart triggers a repair.

A promoted replica (or a restarted standalone Redis) may lack writes its predecessor had
acknowledged, for offsets the group has already committed, which Kafka will therefore never
deliver again. Every consumer asks Redis who its masters are (``board_redis_masters``) every
``INGEST_FAILOVER_CHECK_SECONDS``; when the answer changes it runs
``boards_lost_writes_repair`` against the group's committed offsets of every partition (not only
its own: the member that applied the lost writes may be gone). Until the repair succeeds (a slot
without a master, a rebuild already running) it tries again at each check.

The periodic check alone leaves a window: a batch retried after the failover could land on the
promoted replica before the next check, and its apply would raise the board's watermark past
the lost offsets, hiding them from the repair. So the batch handler asks again before each
retry at the boards (``before_boards_retry``), and waits while a repair is owed.
"""

from __future__ import annotations

import logging
import time

import redis
from django.db import DatabaseError
from kafka import KafkaConsumer
from kafka.errors import KafkaError
from kafka.structs import TopicPartition

from leaderboard.redis import board_redis_masters, redis_unavailable
from leaderboard.services import RebuildInProgressError, boards_lost_writes_repair

logger = logging.getLogger(__name__)


class BoardRedisWatch:
    def __init__(self, *, topic: str, interval_seconds: float) -> None:
        self.topic = topic
        self.interval = interval_seconds
        self._masters: frozenset[str] | None = None
        self._repair_pending = False
        self._next_check = 0.0

    def observe(self, consumer: KafkaConsumer, *, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        if now < self._next_check:
            return
        self._next_check = now + self.interval
        try:
            masters = board_redis_masters()
        except Exception as exc:
            # RedisClusterException and SlotNotCoveredError are no RedisError: raised, they
            # ended the process, and the restarted one forgot the repair this one owed.
            if not (isinstance(exc, redis.RedisError) or redis_unavailable(exc)):
                raise
            logger.warning("cannot tell the boards' Redis masters: %s", exc)
            return
        if masters != self._masters:
            if self._masters is not None:
                logger.warning(
                    "the boards' Redis masters changed (%d -> %d known): looking for lost writes",
                    len(self._masters),
                    len(masters),
                )
                self._repair_pending = True
            self._masters = masters
        if self._repair_pending:
            self._repair(consumer)

    def before_boards_retry(self, consumer: KafkaConsumer) -> None:
        """Before the batch's next attempt at the boards, after one failed: check the masters
        now, repair if they changed, and raise ``redis.ConnectionError`` while a repair is owed
        (the caller's retrying waits and calls again)."""
        self.observe(consumer, now=self._next_check)
        if self._repair_pending:
            raise redis.ConnectionError("the boards' Redis failed over: lost-writes repair owed")

    def _repair(self, consumer: KafkaConsumer) -> None:
        try:
            partitions = consumer.partitions_for_topic(self.topic) or set()
            committed: dict[int, int] = {}
            for partition in sorted(partitions):
                offset = consumer.committed(TopicPartition(self.topic, partition))
                if offset is not None:
                    committed[partition] = offset
            repaired = boards_lost_writes_repair(topic=self.topic, committed=committed)
        except Exception as exc:
            # DatabaseError: PostgreSQL away a moment (the repair reads the boards, the stored
            # offsets and the results); a cluster's CLUSTERDOWN or uncovered slots mid-failover.
            # Raised, it ended the process, and the restarted one took the new masters for its
            # first look: the repair owed was forgotten.
            postponed = (redis.RedisError, KafkaError, RebuildInProgressError, DatabaseError)
            if not (isinstance(exc, postponed) or redis_unavailable(exc)):
                raise
            logger.warning("lost-writes repair postponed: %s", exc)
            return
        self._repair_pending = False
        logger.warning(
            "lost-writes repair done: %s",
            [(r.board_id, [d.isoformat() for d in r.days]) for r in repaired] or "nothing lost",
        )
