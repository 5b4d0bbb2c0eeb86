"""The Kafka consumer loop: poll a batch, hand it to ``match_results_ingest``, commit.

One consumer reads two topics (contract 0.3: one process type to run): the match results and
the player profiles. A polled batch may hold records of both; each topic's records go to its
own handler (``match_results_ingest``, ``player_profiles_ingest``: match results first, they
are what players wait to see), with their own dead-letter topic, and the offsets of both are
committed together once both handlers returned.

Offsets are committed only after the handler returns, i.e. once PostgreSQL and Redis both hold
the batch; a crash anywhere before that redelivers the batch, and the handler's exactly-once
rule (docs/ingestion.md) makes the redelivery harmless. A dependency that goes away makes the
step that needs it wait with capped exponential backoff, logging what it waits for; nothing is
committed meanwhile. A stop request (SIGTERM/SIGINT in the management command) is honoured
between batches: the batch in hand is finished and committed first.

The loop's parts live beside it: ``retrying`` (waiting out a dependency), ``dead_letters``
(the dead-letter sink), ``offsets`` (commit and lag), ``kafka_watch`` and ``kafka_adapter``
(is Kafka there?), ``stats`` (the counters /metrics.json reads), ``metrics`` (Prometheus).
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import redis
from django.conf import settings
from kafka import KafkaConsumer
from kafka.errors import UnknownTopicOrPartitionError
from kafka.structs import TopicPartition

from leaderboard.models import RefusalCode
from leaderboard.rank_events import KafkaRankEventSink
from leaderboard.services import boards_recover
from players.schema import PROFILE_CODES

from . import metrics
from .board_redis_watch import BoardRedisWatch
from .dead_letters import DeadLetterSink, KafkaDeadLetterSink, dead_letter_producer
from .kafka_adapter import group_coordinator_connected
from .kafka_watch import KafkaWatch
from .offsets import next_offsets, offsets_commit, owed_offsets_commit, partition_lags
from .poll_watchdog import PollWatchdog
from .retrying import Backoff, ConsumerStopping
from .schema import MESSAGE_CODES
from .services import match_results_ingest, player_profiles_ingest
from .stats import ConsumerStats, IngestTotals, consumer_stats_publish
from .topics import topic_create_if_missing

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ConsumerOptions:
    topic: str
    dead_letter_topic: str
    group_id: str
    bootstrap_servers: tuple[str, ...]
    max_poll_records: int
    poll_timeout_ms: int
    stats_interval_seconds: float
    backoff_max_seconds: float
    consumer_id: str
    # Static group membership: a restarted consumer with the same id takes its partitions
    # back at once instead of waiting out the dead one's session.
    group_instance_id: str | None = None
    failover_check_seconds: float = 1.0
    # kafka-python's reconnect backoff cap: how long a broker's return may go unnoticed.
    kafka_reconnect_backoff_max_ms: int = 1000
    # The player-profiles topic and its dead-letter topic; "" : not consumed.
    profiles_topic: str = ""
    profiles_dead_letter_topic: str = ""
    # A poll() that has not returned after this long ends the process (poll_watchdog.py); 0: off.
    poll_stall_seconds: float = 360.0
    # Where the boards' rank events go (docs/events.md).
    rank_events_topic: str = "rank-events"

    @classmethod
    def from_settings(cls, **overrides: Any) -> ConsumerOptions:
        options = cls(
            topic=settings.KAFKA_MATCH_RESULTS_TOPIC,
            dead_letter_topic=settings.KAFKA_DEAD_LETTER_TOPIC,
            group_id=settings.KAFKA_CONSUMER_GROUP,
            bootstrap_servers=tuple(settings.KAFKA_BOOTSTRAP_SERVERS),
            max_poll_records=settings.INGEST_MAX_POLL_RECORDS,
            poll_timeout_ms=settings.INGEST_POLL_TIMEOUT_MS,
            stats_interval_seconds=settings.INGEST_STATS_INTERVAL_SECONDS,
            backoff_max_seconds=settings.INGEST_BACKOFF_MAX_SECONDS,
            consumer_id=f"{socket.gethostname()}-{os.getpid()}",
            group_instance_id=settings.INGEST_GROUP_INSTANCE_ID or None,
            failover_check_seconds=settings.INGEST_FAILOVER_CHECK_SECONDS,
            kafka_reconnect_backoff_max_ms=settings.INGEST_KAFKA_RECONNECT_BACKOFF_MAX_MS,
            profiles_topic=settings.KAFKA_PLAYER_PROFILES_TOPIC,
            profiles_dead_letter_topic=settings.KAFKA_PLAYER_PROFILES_DEAD_LETTER_TOPIC,
            poll_stall_seconds=settings.INGEST_POLL_STALL_SECONDS,
            rank_events_topic=settings.KAFKA_RANK_EVENTS_TOPIC,
        )
        return replace(options, **{k: v for k, v in overrides.items() if v is not None})


class MatchResultConsumer:
    def __init__(self, options: ConsumerOptions, *, stop: threading.Event | None = None) -> None:
        self.options = options
        self.stop_event = stop or threading.Event()
        self.totals = IngestTotals()
        # Batches on both sinks whose offset commit a rebalance refused (partition -> next
        # offset): committed at a graceful stop if the partition is still this member's.
        self._owed: dict[TopicPartition, int] = {}
        self._retrying = Backoff(stop=self.stop_event, max_delay=options.backoff_max_seconds)
        self._last_report = time.monotonic()
        self._last_report_applied = 0
        self._kafka = KafkaWatch(
            group_id=options.group_id, bootstrap_servers=options.bootstrap_servers
        )
        self._board_redis = BoardRedisWatch(
            topic=options.topic, interval_seconds=options.failover_check_seconds
        )
        self._watchdog = PollWatchdog(limit_seconds=options.poll_stall_seconds)
        self._rank_events: KafkaRankEventSink | None = None

    def request_stop(self) -> None:
        self.stop_event.set()

    @property
    def topics(self) -> list[str]:
        """The topics this consumer subscribes to: match results, and profiles if set."""
        profiles = self.options.profiles_topic
        return [self.options.topic, *([profiles] if profiles else [])]

    # --- Kafka clients -----------------------------------------------------------------------

    def _connect_consumer(self) -> KafkaConsumer:
        consumer = KafkaConsumer(
            bootstrap_servers=list(self.options.bootstrap_servers),
            group_id=self.options.group_id,
            group_instance_id=self.options.group_instance_id,
            client_id=f"ingest-{self.options.consumer_id}",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_poll_records=self.options.max_poll_records,
            # Big batches: one fetch carries thousands of small records.
            fetch_max_bytes=52_428_800,
            max_partition_fetch_bytes=8_388_608,
            # A broker that went away is tried again this often at least, not after up to 30 s
            # (kafka-python's default cap on its doubling reconnect backoff).
            reconnect_backoff_max_ms=self.options.kafka_reconnect_backoff_max_ms,
        )
        # Join the group only once the topic's partitions are in the metadata cache: a member
        # that joins before (a topic created a moment ago) can be left without partitions
        # until the next periodic metadata refresh, minutes later.
        for topic in self.topics:
            if not consumer.partitions_for_topic(topic):
                consumer.close(autocommit=False)
                if topic == self.options.profiles_topic:
                    # Nobody may have written to it yet (ingestion/topics.py): created here,
                    # found by the next try.
                    topic_create_if_missing(
                        bootstrap_servers=self.options.bootstrap_servers, name=topic
                    )
                raise UnknownTopicOrPartitionError(f"topic {topic} has no partitions yet")
        consumer.subscribe(self.topics)
        return consumer

    # --- the loop ----------------------------------------------------------------------------

    def run(
        self,
        *,
        until: Callable[[IngestTotals], bool] | None = None,
        max_seconds: float | None = None,
    ) -> IngestTotals:
        """Consume until stopped, or until ``until(totals)`` holds, or ``max_seconds`` pass."""
        deadline = None if max_seconds is None else time.monotonic() + max_seconds
        try:
            consumer = self._retrying("Kafka", self._connect_consumer)
        except ConsumerStopping:
            return self.totals
        try:
            producer = self._retrying(
                "Kafka",
                lambda: dead_letter_producer(
                    bootstrap_servers=self.options.bootstrap_servers,
                    client_id=f"ingest-dlq-{self.options.consumer_id}",
                    reconnect_backoff_max_ms=self.options.kafka_reconnect_backoff_max_ms,
                ),
            )
        except ConsumerStopping:
            consumer.close(autocommit=False)
            return self.totals
        # Created with the settings' partitions and replication rather than left to the
        # broker's auto-creation defaults at the first event or letter: the dead-letter topics
        # too, or on a cluster that creates no topic on its own (auto.create.topics.enable off,
        # as managed Kafka often is) the first bad record stalled the consumer for good, its
        # letter waiting for a topic that never came.
        created = [self.options.rank_events_topic, self.options.dead_letter_topic]
        if self.options.profiles_topic:
            created.append(self.options.profiles_dead_letter_topic)
        try:
            for name in created:
                self._retrying(
                    "Kafka",
                    functools.partial(
                        topic_create_if_missing,
                        bootstrap_servers=self.options.bootstrap_servers,
                        name=name,
                    ),
                )
        except ConsumerStopping:
            consumer.close(autocommit=False)
            producer.close(timeout=5)
            return self.totals
        self._rank_events = KafkaRankEventSink(
            bootstrap_servers=self.options.bootstrap_servers,
            topic=self.options.rank_events_topic,
            client_id=f"ingest-events-{self.options.consumer_id}",
        )
        sink = KafkaDeadLetterSink(
            producer=producer, topic=self.options.dead_letter_topic, source_topic=self.options.topic
        )
        profiles_sink = KafkaDeadLetterSink(
            producer=producer,
            topic=self.options.profiles_dead_letter_topic,
            source_topic=self.options.profiles_topic,
        )
        self._recover_boards()
        metrics.dead_letters_initialise(
            topic=self.options.topic, reasons=[*MESSAGE_CODES, *RefusalCode.values]
        )
        if self.options.profiles_topic:
            metrics.dead_letters_initialise(
                topic=self.options.profiles_topic, reasons=PROFILE_CODES
            )
        logger.info(
            "consuming %s as group %s (dead letters to %s)",
            " and ".join(self.topics),
            self.options.group_id,
            " and ".join(
                [self.options.dead_letter_topic]
                + ([self.options.profiles_dead_letter_topic] if self.options.profiles_topic else [])
            ),
        )
        self._watchdog.start()
        try:
            while not self.stop_event.is_set():
                metrics.loop_passed(topic=self.options.topic)
                with self._watchdog.polling():
                    polled = consumer.poll(
                        timeout_ms=self.options.poll_timeout_ms,
                        max_records=self.options.max_poll_records,
                    )
                if polled:
                    self._handle(consumer, polled, sink, profiles_sink)
                self._kafka.observe(
                    reachable=bool(polled) or group_coordinator_connected(consumer),
                    now=time.monotonic(),
                )
                self._board_redis.observe(consumer)
                self._maybe_report(consumer)
                if until is not None and until(self.totals):
                    break
                if deadline is not None and time.monotonic() > deadline:
                    break
        except ConsumerStopping as exc:
            logger.warning("%s; the uncommitted batch will be delivered again", exc)
        finally:
            self._watchdog.stop()
            committed = owed_offsets_commit(
                consumer=consumer, owed=self._owed, poll_timeout_ms=self.options.poll_timeout_ms
            )
            for tp, offset in committed.items():
                if tp.topic == self.options.topic:
                    self.totals.positions[tp.partition] = offset
            self._report(consumer)
            consumer.close(autocommit=False)
            producer.close(timeout=5)
            if self._rank_events is not None:
                self._rank_events.close()
        logger.info("consumer stopped")
        return self.totals

    def _recover_boards(self) -> None:
        """Before the first batch: rebuild the boards Redis lost while no consumer ran (a
        restart of everything after a Redis loss), so this consumer's writes land on whole
        boards. Beat's recovery task repeats the check every few seconds; a failure here is
        left to it rather than keep the consumer from starting."""
        try:
            report = boards_recover(topic=self.options.topic)
        except Exception:
            logger.exception("board recovery at start-up failed; the periodic task retries it")
            return
        if report.recovered or report.redis_restarted:
            logger.info("board recovery at start-up: %s", report.describe())

    def _handle(
        self,
        consumer: KafkaConsumer,
        polled: dict[TopicPartition, list[Any]],
        sink: DeadLetterSink,
        profiles_sink: DeadLetterSink,
    ) -> None:
        topic = self.options.topic
        # kafka-python's records as they are (a Record each): no copy per record.
        records = [record for tp, batch in polled.items() if tp.topic == topic for record in batch]
        profiles = [record for tp, batch in polled.items() if tp.topic != topic for record in batch]
        with metrics.BATCH_SECONDS.labels(topic=topic).time():
            outcome = match_results_ingest(
                topic=topic,
                records=records,
                dead_letters=sink,
                retrying=self._retrying,
                rank_events=self._rank_events,
                boards_failed=lambda: self._board_redis.before_boards_retry(consumer),
            )
        if profiles:
            profiled = player_profiles_ingest(
                records=profiles, dead_letters=profiles_sink, retrying=self._retrying
            )
            outcome = replace(
                outcome,
                profiles=profiled.profiles,
                profiles_dead_letters=profiled.profiles_dead_letters,
            )
        offsets = next_offsets(polled)
        if offsets_commit(consumer=consumer, offsets=offsets, retrying=self._retrying):
            for tp, offset in offsets.items():
                if tp.topic == topic:
                    self.totals.positions[tp.partition] = offset
                self._owed.pop(tp, None)
        else:
            for tp, offset in offsets.items():
                self._owed[tp] = max(offset, self._owed.get(tp, offset))
        self.totals.add(outcome)
        metrics.RECORDS.labels(topic=topic).inc(outcome.records)
        metrics.APPLIED.labels(topic=topic).inc(outcome.applied)
        metrics.DUPLICATES.labels(topic=topic).inc(outcome.duplicates)
        metrics.NOT_COUNTED.labels(topic=topic).inc(outcome.not_counted)
        metrics.RANK_EVENTS.labels(topic=topic).inc(outcome.rank_events)
        self._observe_partitions(consumer)

    def _observe_partitions(self, consumer: KafkaConsumer) -> int | None:
        """Per-partition lag and committed offsets to the metrics; the summed lag (None: unknown).

        Cut off from Kafka, the high-water marks are the last ones seen: the lag is unknown and
        the gauges keep their last values."""
        if self._kafka.lost:
            return None
        topic = self.options.topic
        assigned = {tp.partition for tp in consumer.assignment() if tp.topic == topic}
        # A partition given to another member is committed there: what this one committed is
        # stale, and a partition that comes back would show a lag of everything the other
        # member applied meanwhile. Unknown until this member commits it again.
        for partition in set(self.totals.positions) - assigned:
            del self.totals.positions[partition]
        lags = partition_lags(consumer=consumer, positions=self.totals.positions, topic=topic)
        metrics.partitions_observe(
            topic=topic, lag=lags, committed=self.totals.positions, assigned=assigned
        )
        return sum(lags.values()) if lags else None

    # --- observability -----------------------------------------------------------------------

    def _maybe_report(self, consumer: KafkaConsumer) -> None:
        if time.monotonic() - self._last_report >= self.options.stats_interval_seconds:
            self._report(consumer)

    def _report(self, consumer: KafkaConsumer) -> None:
        now = time.monotonic()
        elapsed = max(now - self._last_report, 1e-6)
        rate = (self.totals.applied - self._last_report_applied) / elapsed
        self._last_report, self._last_report_applied = now, self.totals.applied
        self.totals.lag = self._observe_partitions(consumer)
        if not consumer.assignment():
            logger.warning(
                "no partitions of %s assigned yet (group %s; Kafka at %s)",
                self.options.topic,
                self.options.group_id,
                ",".join(self.options.bootstrap_servers),
            )
        logger.info(
            "ingest: %.1f results/s applied; totals: %d records, %d applied, %d duplicates, "
            "%d dead letters, %d not counted, %d rank events; lag %s",
            rate,
            self.totals.records,
            self.totals.applied,
            self.totals.duplicates,
            self.totals.dead_letters,
            self.totals.not_counted,
            self.totals.rank_events,
            "unknown" if self.totals.lag is None else self.totals.lag,
        )
        stats = ConsumerStats.from_totals(
            self.totals,
            consumer_id=self.options.consumer_id,
            topic=self.options.topic,
            group_id=self.options.group_id,
            applied_per_second=rate,
            updated_at=int(time.time()),
        )
        try:
            consumer_stats_publish(
                stats=stats, ttl_seconds=int(self.options.stats_interval_seconds * 3) + 5
            )
        except redis.exceptions.RedisError as exc:
            logger.warning("could not publish consumer stats: %s", exc)
