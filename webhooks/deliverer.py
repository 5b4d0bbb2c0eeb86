"""The webhook deliverer: rank events from Kafka to every endpoint that wants them.

``manage.py deliver_webhooks`` runs one ``WebhookDeliverer``. Its own thread reads
``rank-events`` as a consumer group of its own (``WEBHOOK_CONSUMER_GROUP``) and hands each event
to the worker (worker.py) of every active endpoint whose filters match; each worker has a
thread, a connection and a bounded queue of its own. The loop never waits for an endpoint: what
does not fit in a queue is kept in PostgreSQL at once (and sent from there).

Offsets (offsets.py): an event's offset is committed only once every endpoint it was handed to
has it, delivered or kept in PostgreSQL; a crash re-reads every event some endpoint did not
have (at least once: receivers deduplicate by ``eventId``). A stop request finishes the
requests in flight and commits what is settled; what is still queued is read again next time.
An event the deliverer cannot read goes to ``WEBHOOK_DEAD_LETTER_TOPIC`` with its reason.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import redis
from django.conf import settings
from django.db import connection
from kafka import KafkaConsumer
from kafka.errors import UnknownTopicOrPartitionError
from kafka.structs import TopicPartition

from ingestion.dead_letters import KafkaDeadLetterSink, dead_letter_producer
from ingestion.offsets import offsets_commit, partition_lags
from ingestion.records import DeadLetter
from ingestion.retrying import Backoff, ConsumerStopping
from ingestion.topics import topic_create_if_missing

from .backoff import Clock, system_clock
from .events import EventRejected, rank_event_decode
from .offsets import OffsetTracker
from .selectors import EndpointConfig, webhook_endpoints_active
from .stats import DelivererStats, EndpointLive, deliverer_stats_publish
from .targets import Resolver, system_resolver
from .worker import (
    KEPT_QUEUE_FULL,
    EndpointCounters,
    EndpointWorker,
    Queued,
    WorkerOptions,
    batches_to_keep,
    keep_endpoint,
)

logger = logging.getLogger(__name__)

# Seconds without a commit after a rebalance refused one.
REBALANCE_PAUSE = 2.0


class DelivererStalled(Exception):
    """Commits refused for longer than ``rebalance_stall_seconds``: the process should end and
    be started again by its supervisor."""


@dataclass(frozen=True, slots=True)
class DelivererOptions:
    topic: str
    dead_letter_topic: str
    group_id: str
    bootstrap_servers: tuple[str, ...]
    max_poll_records: int
    poll_timeout_ms: int
    stats_interval_seconds: float
    refresh_seconds: float
    batch_size: int
    queue_size: int
    connect_timeout: float
    read_timeout: float
    retry_first: float
    retry_max: float
    retry_hours: float
    allow_private: bool
    deliverer_id: str
    # Static group membership: a restarted deliverer with the same id takes its partitions back
    # at once instead of waiting out the dead one's session.
    group_instance_id: str | None = None
    # Retry cap while PostgreSQL or Kafka is unreachable.
    backoff_max_seconds: float = 2.0
    # Offsets are committed at most this often (and at a stop).
    commit_interval_seconds: float = 0.5
    # How long an endpoint with a full queue may hold up the reading of Kafka before it counts
    # as slow (what it cannot take then waits in PostgreSQL, and the others go on).
    queue_wait_seconds: float = 1.0
    # kafka-python's member can stay out of its group for minutes after a rebalance (seen on
    # the local three-broker cluster): every commit is refused meanwhile, while the events are
    # still delivered. Past this many seconds of refusals the process ends (DelivererStalled)
    # for its supervisor to restart it: with static membership the restart takes its
    # partitions back at once and re-sends only what was not committed.
    rebalance_stall_seconds: float = 120.0
    kafka_reconnect_backoff_max_ms: int = 1000

    @classmethod
    def from_settings(cls, **overrides: Any) -> DelivererOptions:
        options = cls(
            topic=settings.KAFKA_RANK_EVENTS_TOPIC,
            dead_letter_topic=settings.WEBHOOK_DEAD_LETTER_TOPIC,
            group_id=settings.WEBHOOK_CONSUMER_GROUP,
            bootstrap_servers=tuple(settings.KAFKA_BOOTSTRAP_SERVERS),
            max_poll_records=settings.WEBHOOK_MAX_POLL_RECORDS,
            poll_timeout_ms=200,
            stats_interval_seconds=settings.WEBHOOK_STATS_INTERVAL_SECONDS,
            refresh_seconds=settings.WEBHOOK_REFRESH_SECONDS,
            batch_size=settings.WEBHOOK_BATCH_SIZE,
            queue_size=settings.WEBHOOK_QUEUE_SIZE,
            connect_timeout=settings.WEBHOOK_CONNECT_TIMEOUT_SECONDS,
            read_timeout=settings.WEBHOOK_TIMEOUT_SECONDS,
            retry_first=settings.WEBHOOK_RETRY_FIRST_SECONDS,
            retry_max=settings.WEBHOOK_RETRY_MAX_SECONDS,
            retry_hours=settings.WEBHOOK_RETRY_HOURS,
            rebalance_stall_seconds=settings.WEBHOOK_REBALANCE_STALL_SECONDS,
            allow_private=settings.WEBHOOK_ALLOW_PRIVATE,
            deliverer_id=f"{socket.gethostname()}-{os.getpid()}",
            group_instance_id=settings.WEBHOOK_GROUP_INSTANCE_ID or None,
            backoff_max_seconds=settings.INGEST_BACKOFF_MAX_SECONDS,
            kafka_reconnect_backoff_max_ms=settings.INGEST_KAFKA_RECONNECT_BACKOFF_MAX_MS,
        )
        return replace(options, **{k: v for k, v in overrides.items() if v is not None})

    @property
    def worker(self) -> WorkerOptions:
        return WorkerOptions(
            batch_size=self.batch_size,
            queue_size=self.queue_size,
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            retry_first=self.retry_first,
            retry_max=self.retry_max,
            retry_hours=self.retry_hours,
            refresh_seconds=self.refresh_seconds,
            allow_private=self.allow_private,
        )


@dataclass(slots=True)
class DelivererTotals:
    """What the loop did since it started."""

    records: int = 0
    dead_letters: int = 0
    handed: int = 0  # (event, endpoint) pairs handed to the workers
    overflow: int = 0  # of those, kept in PostgreSQL at once (a full queue)
    committed: dict[int, int] = field(default_factory=dict)  # partition -> next offset


class WebhookDeliverer:
    def __init__(
        self,
        options: DelivererOptions,
        *,
        stop: threading.Event | None = None,
        clock: Clock = system_clock,
        resolver: Resolver = system_resolver,
    ) -> None:
        self.options = options
        self.stop_event = stop or threading.Event()
        self.totals = DelivererTotals()
        self._clock = clock
        self._resolver = resolver
        self._retrying = Backoff(stop=self.stop_event, max_delay=options.backoff_max_seconds)
        self._tracker = OffsetTracker()
        self._workers: dict[int, EndpointWorker] = {}
        self._retired: list[EndpointWorker] = []
        self._counters: dict[int, EndpointCounters] = {}
        self._next_refresh = 0.0
        self._next_commit = 0.0
        self._next_report = 0.0
        self._blocked_since: dict[int, float] = {}
        self._paused = False
        self._refused_since: float | None = None
        self._last_report = (time.monotonic(), 0)

    def request_stop(self) -> None:
        self.stop_event.set()

    # --- Kafka -------------------------------------------------------------------------------

    def _connect(self) -> KafkaConsumer:
        consumer = KafkaConsumer(
            bootstrap_servers=list(self.options.bootstrap_servers),
            group_id=self.options.group_id,
            group_instance_id=self.options.group_instance_id,
            client_id=f"webhooks-{self.options.deliverer_id}",
            enable_auto_commit=False,
            # A group's first start reads the topic from its beginning: no event published
            # before the deliverer ever ran is lost.
            auto_offset_reset="earliest",
            max_poll_records=self.options.max_poll_records,
            reconnect_backoff_max_ms=self.options.kafka_reconnect_backoff_max_ms,
        )
        if not consumer.partitions_for_topic(self.options.topic):
            consumer.close(autocommit=False)
            # The write path may not have published yet: created here, found by the next try.
            topic_create_if_missing(
                bootstrap_servers=self.options.bootstrap_servers, name=self.options.topic
            )
            raise UnknownTopicOrPartitionError(f"topic {self.options.topic} has no partitions yet")
        consumer.subscribe([self.options.topic])
        return consumer

    def _commit(self, consumer: KafkaConsumer) -> bool:
        """Commit what is settled; False when a group rebalance refused it."""
        due = self._tracker.committable()
        if not due:
            return True
        if not offsets_commit(consumer=consumer, offsets=due, retrying=self._retrying):
            return False
        self._committed(due)
        return True

    def _watch_refusals(self, *, done: bool, now: float) -> None:
        if done:
            self._refused_since = None
            return
        if self._refused_since is None:
            self._refused_since = now
        elif now - self._refused_since > self.options.rebalance_stall_seconds:
            raise DelivererStalled(
                f"every offset commit refused for {now - self._refused_since:.0f} s (the "
                "consumer stays out of its group): ending for the supervisor to restart"
            )

    def _committed(self, offsets: dict[TopicPartition, int]) -> None:
        self._tracker.committed(offsets)
        for tp, offset in offsets.items():
            self.totals.committed[tp.partition] = offset

    # --- endpoints ---------------------------------------------------------------------------

    def _worker(self, config: EndpointConfig) -> EndpointWorker:
        counters = self._counters.setdefault(config.endpoint_id, EndpointCounters())
        worker = EndpointWorker(
            config=config,
            options=self.options.worker,
            counters=counters,
            clock=self._clock,
            resolver=self._resolver,
            retrying=self._retrying,
        )
        worker.start()
        return worker

    def _refresh(self) -> None:
        """Start workers for new endpoints, reconfigure changed ones, retire the others (what
        they still queue is kept), and replace a worker whose thread died."""
        configs = {c.endpoint_id: c for c in self._retrying("PostgreSQL", webhook_endpoints_active)}
        for endpoint_id, worker in list(self._workers.items()):
            if endpoint_id not in configs:
                worker.stop(keep_queued=True)
                self._retired.append(self._workers.pop(endpoint_id))
        for endpoint_id, config in configs.items():
            current = self._workers.get(endpoint_id)
            if current is None:
                self._workers[endpoint_id] = self._worker(config)
                logger.info("delivering to webhook endpoint %d (%s)", endpoint_id, config.url)
            elif not current.alive():
                replacement = self._workers[endpoint_id] = self._worker(config)
                self._hand(replacement, current.drain())
            elif current.config != config:
                current.configure(config)
        self._retired = [w for w in self._retired if not w.join(0)]

    def _hand(self, worker: EndpointWorker, items: list[Queued]) -> None:
        """Queue ``items`` on ``worker``; keep what it does not take in PostgreSQL now."""
        self._keep_overflow(worker, worker.offer(items))

    def _keep_overflow(self, worker: EndpointWorker, overflow: list[Queued]) -> None:
        if not overflow:
            return
        keep_endpoint(
            endpoint_id=worker.endpoint_id,
            batches=batches_to_keep(overflow, size=self.options.batch_size),
            items=overflow,
            now=self._clock(),
            next_attempt_at=self._clock(),
            attempts=0,
            error=KEPT_QUEUE_FULL,
            retry_hours=self.options.retry_hours,
            retrying=self._retrying,
            counters=self._counters[worker.endpoint_id],
        )
        self.totals.overflow += len(overflow)
        worker.kept_elsewhere()

    # --- the loop ----------------------------------------------------------------------------

    def run(
        self,
        *,
        until: Callable[[DelivererTotals], bool] | None = None,
        max_seconds: float | None = None,
    ) -> DelivererTotals:
        """Deliver until stopped, or until ``until(totals)`` holds, or ``max_seconds`` pass."""
        deadline = None if max_seconds is None else time.monotonic() + max_seconds
        try:
            consumer = self._retrying("Kafka", self._connect)
        except ConsumerStopping:
            return self.totals
        try:
            producer = self._retrying(
                "Kafka",
                lambda: dead_letter_producer(
                    bootstrap_servers=self.options.bootstrap_servers,
                    client_id=f"webhooks-dlq-{self.options.deliverer_id}",
                    reconnect_backoff_max_ms=self.options.kafka_reconnect_backoff_max_ms,
                ),
            )
        except ConsumerStopping:
            consumer.close(autocommit=False)
            return self.totals
        sink = KafkaDeadLetterSink(
            producer=producer, topic=self.options.dead_letter_topic, source_topic=self.options.topic
        )
        logger.info(
            "delivering %s to webhooks as group %s (dead letters to %s)",
            self.options.topic,
            self.options.group_id,
            self.options.dead_letter_topic,
        )
        try:
            while not self.stop_event.is_set():
                now = time.monotonic()
                if now >= self._next_refresh:
                    self._refresh()
                    self._next_refresh = now + self.options.refresh_seconds
                polled = consumer.poll(
                    # While paused only the group is served: look at the queues again soon.
                    timeout_ms=10 if self._paused else self.options.poll_timeout_ms,
                    max_records=self.options.max_poll_records,
                )
                # A partition that left this process in a rebalance is forgotten (its next
                # owner reads what was not committed); one that stayed keeps its position in
                # kafka-python, and its holds here.
                self._tracker.retain(consumer.assignment())
                if polled:
                    self._dispatch(polled, sink)
                self._flow(consumer)
                now = time.monotonic()
                if now >= self._next_commit:
                    # Refused during a rebalance: only poll() completes it, so leave the group
                    # a while to finish before asking again.
                    done = self._commit(consumer)
                    pause = self.options.commit_interval_seconds if done else REBALANCE_PAUSE
                    self._next_commit = now + pause
                    self._watch_refusals(done=done, now=now)
                if now >= self._next_report:
                    self._report(consumer)
                    self._next_report = now + self.options.stats_interval_seconds
                if until is not None and until(self.totals):
                    break
                if deadline is not None and now > deadline:
                    break
        except ConsumerStopping as exc:
            logger.warning("%s; what is not settled will be read again", exc)
        finally:
            self._stop_workers()
            with contextlib.suppress(ConsumerStopping):
                self._commit(consumer)
            self._report(consumer)
            consumer.close(autocommit=False)
            producer.close(timeout=5)
            connection.close()
        logger.info("webhook deliverer stopped")
        return self.totals

    def _stop_workers(self) -> None:
        # A retired worker (its endpoint deactivated) still keeps what it queued: those events
        # will not be routed to it again when they are read next time.
        for worker in self._workers.values():
            worker.stop(keep_queued=False)
        workers = [*self._workers.values(), *self._retired]
        # A request in flight finishes within its timeouts; past that the thread is left (a
        # daemon) and its events, not committed, are read again next time.
        limit = time.monotonic() + self.options.connect_timeout + self.options.read_timeout + 1
        for worker in workers:
            worker.join(max(0.0, limit - time.monotonic()))

    def _flow(self, consumer: KafkaConsumer) -> None:
        """Read no more from Kafka while an endpoint that keeps up has a full queue (a backlog
        goes to the endpoints at their pace instead of into PostgreSQL); an endpoint that holds
        this up longer than ``queue_wait_seconds`` is slow: its excess is kept in PostgreSQL and
        it no longer holds anything up, so a slow endpoint never slows the others for long."""
        now = time.monotonic()
        blocking = False
        for worker in self._workers.values():
            if not worker.over_limit():
                self._blocked_since.pop(worker.endpoint_id, None)
                continue
            since = self._blocked_since.setdefault(worker.endpoint_id, now)
            if now - since <= self.options.queue_wait_seconds:
                blocking = True
                continue
            del self._blocked_since[worker.endpoint_id]
            shed = worker.shed()
            logger.info(
                "webhook endpoint %d is slow: %d queued event(s) kept in PostgreSQL",
                worker.endpoint_id,
                len(shed),
            )
            self._keep_overflow(worker, shed)
        if blocking:
            # Every time: a partition assigned in a rebalance meanwhile comes unpaused.
            consumer.pause(*consumer.assignment())
            self._paused = True
        elif self._paused:
            consumer.resume(*consumer.paused())
            self._paused = False

    def _dispatch(self, polled: dict[TopicPartition, list[Any]], sink: KafkaDeadLetterSink) -> None:
        now = self._clock()
        handed: dict[int, list[Queued]] = {}
        letters: list[tuple[TopicPartition, DeadLetter]] = []
        workers = list(self._workers.values())
        for tp, records in polled.items():
            for record in records:
                self.totals.records += 1
                try:
                    event = rank_event_decode(record.value)
                except EventRejected as rejected:
                    letters.append((tp, DeadLetter(record, rejected.code, rejected.reason)))
                    continue
                wanted = [w for w in workers if w.config.wants(event)]
                holds = self._tracker.read(tp, record.offset, holders=len(wanted))
                for worker, hold in zip(wanted, holds, strict=True):
                    handed.setdefault(worker.endpoint_id, []).append(
                        Queued(event=event, hold=hold, received_at=now)
                    )
        if letters:
            self._retrying("Kafka", lambda: sink.publish(letters=[letter for _, letter in letters]))
            for tp, letter in letters:
                self._tracker.read(tp, letter.record.offset, holders=0)
            self.totals.dead_letters += len(letters)
        for endpoint_id, items in handed.items():
            self.totals.handed += len(items)
            self._hand(self._workers[endpoint_id], items)

    # --- observability -----------------------------------------------------------------------

    def _live(self) -> tuple[EndpointLive, ...]:
        live = []
        for endpoint_id, counters in sorted(self._counters.items()):
            worker = self._workers.get(endpoint_id)
            if worker is not None:
                live.append(worker.live())
                continue
            with counters.lock:
                live.append(
                    EndpointLive(
                        endpoint_id=endpoint_id,
                        delivered_events=counters.delivered_events,
                        delivered_batches=counters.delivered_batches,
                        failed_attempts=counters.failed_attempts,
                        given_up_events=counters.given_up_events,
                        kept_events=counters.kept_events,
                        queued_events=0,
                        oldest_queued_at=None,
                        last_success_at=counters.last_success_at,
                        last_failure_at=counters.last_failure_at,
                        last_error=counters.last_error,
                    )
                )
        return tuple(live)

    def _report(self, consumer: KafkaConsumer) -> None:
        endpoints = self._live()
        delivered = sum(e.delivered_events for e in endpoints)
        started, before = self._last_report
        now = time.monotonic()
        rate = (delivered - before) / max(now - started, 1e-6)
        self._last_report = (now, delivered)
        lags = partition_lags(
            consumer=consumer, positions=self.totals.committed, topic=self.options.topic
        )
        lag = sum(lags.values()) if lags else None
        logger.info(
            "webhooks: %.1f events/s delivered; %d endpoint(s); %d delivered, %d failed tries, "
            "%d kept, %d queued; lag %s",
            rate,
            len(self._workers),
            delivered,
            sum(e.failed_attempts for e in endpoints),
            sum(e.kept_events for e in endpoints),
            sum(e.queued_events for e in endpoints),
            "unknown" if lag is None else lag,
        )
        stats = DelivererStats(
            deliverer_id=self.options.deliverer_id,
            group_id=self.options.group_id,
            topic=self.options.topic,
            updated_at=time.time(),
            kafka_lag=lag,
            endpoints=endpoints,
        )
        try:
            deliverer_stats_publish(
                stats=stats, ttl_seconds=int(self.options.stats_interval_seconds * 3) + 5
            )
        except redis.exceptions.RedisError as exc:
            logger.warning("could not publish webhook stats: %s", exc)
