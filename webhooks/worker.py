"""One endpoint's delivery thread: its bounded queue, its POSTs, its retries.

Each active endpoint has its own worker thread, connection and queue, so a slow or failing
endpoint only ever waits for itself. The worker sends what is queued in batches of up to
``batch_size`` events, one request at a time, and alternates with the endpoint's batches kept
in PostgreSQL that are due. An event leaves the worker's hands (its Kafka hold is released,
offsets.py) only once the endpoint answered 2xx or PostgreSQL keeps it.

After a failure the endpoint is *backing off* until a time drawn by ``backoff.retry_delay``
from its failures in a row: meanwhile nothing is sent to it, whatever arrives for it is kept
(due at the end of the backoff), and its other kept batches are postponed to then too; when the
backoff ends one batch probes the endpoint. A success ends the backoff and the kept batches
follow one after another.
"""

from __future__ import annotations

import logging
import random
import threading
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db import IntegrityError, connection

from ingestion.retrying import ConsumerStopping, Retrying

from .backoff import Clock, retry_delay
from .events import RankEvent, batch_body
from .offsets import Hold
from .selectors import EndpointConfig, webhook_next_due_at
from .services import (
    BatchToKeep,
    KeptBatch,
    webhook_deliveries_keep,
    webhook_deliveries_postpone,
    webhook_delivery_claim_due,
    webhook_delivery_delivered,
    webhook_delivery_failed,
)
from .signing import DELIVERY_HEADER, EVENT_IDS_HEADER, SIGNATURE_HEADER, signature_header
from .stats import EndpointLive
from .targets import Resolver
from .transport import Answer, EndpointTransport

logger = logging.getLogger(__name__)

# Longest real-time wait of an idle worker: how soon it sees a stop, a clock that jumped (the
# tests' clock) or a batch staff resent.
IDLE_TICK_SECONDS = 0.5
# The soonest a worker that found no kept batch to claim asks PostgreSQL again.
KEPT_RECHECK_SECONDS = 0.5
# Why a batch was kept without being sent.
KEPT_QUEUE_FULL = "not sent yet: the endpoint's queue was full"
KEPT_BACKING_OFF = "not sent yet: the endpoint is backing off after a failure"
KEPT_DEACTIVATED = "not sent yet: the endpoint was deactivated"


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    batch_size: int
    queue_size: int
    connect_timeout: float
    read_timeout: float
    retry_first: float
    retry_max: float
    retry_hours: float
    refresh_seconds: float
    allow_private: bool


@dataclass(slots=True)
class Queued:
    """An event waiting for one endpoint, with that endpoint's hold on its Kafka offset."""

    event: RankEvent
    hold: Hold
    received_at: float


@dataclass(slots=True)
class EndpointCounters:
    """What this process did for one endpoint since it started (survives the worker)."""

    delivered_events: int = 0
    delivered_batches: int = 0
    failed_attempts: int = 0
    given_up_events: int = 0
    kept_events: int = 0
    last_success_at: float | None = None
    last_failure_at: float | None = None
    last_error: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)


def batches_to_keep(items: Sequence[Queued], *, size: int) -> list[BatchToKeep]:
    return [
        BatchToKeep(
            delivery_id=uuid.uuid4(),
            body=batch_body([q.event.raw for q in chunk]),
            event_ids=tuple(q.event.event_id for q in chunk),
            received_at=min(q.received_at for q in chunk),
        )
        for chunk in (items[i : i + size] for i in range(0, len(items), size))
    ]


class EndpointWorker:
    def __init__(
        self,
        *,
        config: EndpointConfig,
        options: WorkerOptions,
        counters: EndpointCounters,
        clock: Clock,
        resolver: Resolver,
        retrying: Retrying,
        rng: random.Random | None = None,
    ) -> None:
        self.endpoint_id = config.endpoint_id
        self._config = config
        self._options = options
        self._counters = counters
        self._clock = clock
        self._retrying = retrying
        self._rng = rng or random.Random()  # noqa: S311 -- jitter, not a secret
        self._transport = EndpointTransport(
            connect_timeout=options.connect_timeout,
            read_timeout=options.read_timeout,
            allow_private=options.allow_private,
            resolver=resolver,
        )
        self._queue: deque[Queued] = deque()
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._keep_on_stop = False
        self._failures = 0
        self._backoff_until = 0.0
        self._slow = False
        self._next_kept_check = 0.0
        # After a kept batch went out, live events go next: kept batches due one after another
        # (a slow endpoint's overflow is due at once) never starve the queue, whose events hold
        # every endpoint's Kafka offsets until sent.
        self._live_turn = False
        self._thread = threading.Thread(
            target=self._run, name=f"webhook-{config.endpoint_id}", daemon=True
        )

    # --- the dispatcher's side (the Kafka loop's thread) ----------------------------------------

    def start(self) -> None:
        self._thread.start()

    @property
    def config(self) -> EndpointConfig:
        return self._config

    def configure(self, config: EndpointConfig) -> None:
        """A changed endpoint (URL, secret, filters): used from its next request on."""
        self._config = config

    def offer(self, items: list[Queued]) -> list[Queued]:
        """Queue ``items``; return what the caller must keep in PostgreSQL. Never waits.

        An endpoint that keeps up takes everything (its queue may pass ``queue_size`` by one
        poll: the dispatcher then stops reading Kafka until it has room, see ``over_limit``);
        one that is slow or backing off takes what fits under ``queue_size`` only."""
        with self._cond:
            if self._slow or self._clock() < self._backoff_until:
                room = max(0, self._options.queue_size - len(self._queue))
                accepted, overflow = items[:room], items[room:]
            else:
                accepted, overflow = items, []
            self._queue.extend(accepted)
            if accepted:
                self._cond.notify()
        return overflow

    def over_limit(self) -> bool:
        """Whether this endpoint, keeping up so far, has ``queue_size`` events waiting."""
        with self._cond:
            return not self._slow and len(self._queue) >= self._options.queue_size

    def shed(self) -> list[Queued]:
        """Mark the endpoint slow (it held the dispatcher up too long) and hand back what it
        queues beyond ``queue_size``, newest first out, for the caller to keep in PostgreSQL.
        It stays slow until it has caught up: nothing queued and no kept batch left."""
        with self._cond:
            self._slow = True
            excess = max(0, len(self._queue) - self._options.queue_size)
            shed = [self._queue.pop() for _ in range(excess)]
        shed.reverse()
        return shed

    def kept_elsewhere(self) -> None:
        """A batch of this endpoint was just kept by someone else (the dispatcher's overflow,
        staff resending): look for due ones at once."""
        with self._cond:
            self._next_kept_check = 0.0
            self._cond.notify()

    def stop(self, *, keep_queued: bool) -> None:
        """Stop after the request in flight. ``keep_queued``: what is still queued is kept in
        PostgreSQL first (the endpoint was deactivated); otherwise it is left to be read again
        from Kafka (the process is stopping and will not commit it)."""
        self._keep_on_stop = keep_queued
        self._stop.set()
        with self._cond:
            self._cond.notify()

    def drain(self) -> list[Queued]:
        """Everything still queued (a dead worker's events, handed to its replacement)."""
        return self._take(None)

    def join(self, timeout: float) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def live(self) -> EndpointLive:
        with self._cond:
            queued = len(self._queue)
            oldest = self._queue[0].received_at if self._queue else None
        c = self._counters
        with c.lock:
            return EndpointLive(
                endpoint_id=self.endpoint_id,
                delivered_events=c.delivered_events,
                delivered_batches=c.delivered_batches,
                failed_attempts=c.failed_attempts,
                given_up_events=c.given_up_events,
                kept_events=c.kept_events,
                queued_events=queued,
                oldest_queued_at=oldest,
                last_success_at=c.last_success_at,
                last_failure_at=c.last_failure_at,
                last_error=c.last_error,
            )

    # --- the worker's thread ----------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._step()
        except ConsumerStopping:
            pass
        except Exception:
            # Never silently: the deliverer notices the dead thread and starts a new worker.
            logger.exception("webhook worker for endpoint %d failed", self.endpoint_id)
        finally:
            try:
                if self._keep_on_stop:
                    self._keep(
                        self._take(None), next_attempt_at=self._clock(), error=KEPT_DEACTIVATED
                    )
            except ConsumerStopping:
                pass
            finally:
                self._transport.close()
                connection.close()

    def alive(self) -> bool:
        return self._thread.is_alive()

    def _step(self) -> None:
        now = self._clock()
        if now < self._backoff_until:
            waiting = self._take(None)
            if waiting:
                self._keep(waiting, next_attempt_at=self._backoff_until, error=KEPT_BACKING_OFF)
            # Nothing is sent before the backoff ends, kept batches due or not.
            self._wait(self._backoff_until - now, wake_for_kept=False)
            return
        live_turn, self._live_turn = self._live_turn and self._has_queued(), False
        recheck = 0.0
        if now >= self._next_kept_check and not live_turn:
            kept = self._retrying(
                "PostgreSQL",
                lambda: webhook_delivery_claim_due(
                    endpoint_id=self.endpoint_id,
                    now=now,
                    lease_seconds=self._options.connect_timeout + self._options.read_timeout + 30,
                ),
            )
            if kept is not None:
                self._send_kept(kept)
                self._live_turn = True
                return
            due = self._retrying(
                "PostgreSQL", lambda: webhook_next_due_at(endpoint_id=self.endpoint_id)
            )
            check = now + self._options.refresh_seconds
            self._next_kept_check = check if due is None else min(check, max(due, now))
            # Due, yet nothing to claim: another claim holds the row right now. Asked again at
            # once, it would be asked in a loop.
            recheck = KEPT_RECHECK_SECONDS if due is not None and due <= now else 0.0
            if due is None and self._slow:
                with self._cond:
                    if not self._queue:
                        self._slow = False  # caught up: it takes every event again
        items = self._take(self._options.batch_size)
        if items:
            self._send_live(items)
            return
        self._wait(max(self._next_kept_check - now, recheck))

    def _take(self, limit: int | None) -> list[Queued]:
        with self._cond:
            count = len(self._queue) if limit is None else min(limit, len(self._queue))
            return [self._queue.popleft() for _ in range(count)]

    def _has_queued(self) -> bool:
        with self._cond:
            return bool(self._queue)

    def _wait(self, seconds: float, *, wake_for_kept: bool = True) -> None:
        with self._cond:
            if self._queue or self._stop.is_set():
                return
            if wake_for_kept and self._next_kept_check == 0.0:
                return
            self._cond.wait(max(0.0, min(seconds, IDLE_TICK_SECONDS)))

    def _post(self, *, delivery_id: uuid.UUID, body: bytes, event_ids: Sequence[str]) -> Answer:
        config = self._config
        if config.secret is None:
            return Answer(status=0, error=config.secret_error)
        timestamp = int(self._clock())
        headers = {
            SIGNATURE_HEADER: signature_header(
                secret=config.secret, timestamp=timestamp, body=body
            ),
            EVENT_IDS_HEADER: ",".join(event_ids),
            DELIVERY_HEADER: str(delivery_id),
        }
        return self._transport.post(url=config.url, body=body, headers=headers)

    def _send_live(self, items: list[Queued]) -> None:
        (batch,) = batches_to_keep(items, size=len(items))
        answer = self._post(
            delivery_id=batch.delivery_id, body=batch.body, event_ids=batch.event_ids
        )
        now = self._clock()
        if answer.ok:
            self._succeeded(now, len(items))
            for q in items:
                q.hold.release()
            return
        retry_at = self._failed(now, answer)
        self._keep_batches(
            items,
            [batch],
            next_attempt_at=retry_at,
            attempts=1,
            error=answer.error,
            status=answer.status or None,
        )

    def _send_kept(self, kept: KeptBatch) -> None:
        answer = self._post(delivery_id=kept.delivery_id, body=kept.body, event_ids=kept.event_ids)
        now = self._clock()
        if answer.ok:
            self._retrying(
                "PostgreSQL", lambda: webhook_delivery_delivered(delivery_id=kept.delivery_id)
            )
            self._succeeded(now, len(kept.event_ids))
            self._next_kept_check = now  # the next due batch right away
            return
        retry_at = self._failed(now, answer)
        gave_up = self._retrying(
            "PostgreSQL",
            lambda: webhook_delivery_failed(
                delivery_id=kept.delivery_id,
                now=now,
                retry_at=retry_at,
                error=answer.error,
                status=answer.status or None,
            ),
        )
        if gave_up:
            with self._counters.lock:
                self._counters.given_up_events += len(kept.event_ids)
            logger.warning(
                "webhook endpoint %d: gave up a batch of %d event(s) (delivery %s) after %d "
                "attempt(s): %s",
                self.endpoint_id,
                len(kept.event_ids),
                kept.delivery_id,
                kept.attempts + 1,
                answer.error,
            )

    def _succeeded(self, now: float, events: int) -> None:
        self._failures = 0
        self._backoff_until = 0.0
        c = self._counters
        with c.lock:
            c.delivered_events += events
            c.delivered_batches += 1
            c.last_success_at = now

    def _failed(self, now: float, answer: Answer) -> float:
        """Count a failed try and start the backoff; the time of the next try."""
        self._failures += 1
        delay = retry_delay(
            failures=self._failures,
            first=self._options.retry_first,
            cap=self._options.retry_max,
            rng=self._rng,
        )
        self._backoff_until = now + delay
        c = self._counters
        with c.lock:
            c.failed_attempts += 1
            c.last_failure_at = now
            c.last_error = answer.error
        logger.info(
            "webhook endpoint %d: %s; next try in %.1fs", self.endpoint_id, answer.error, delay
        )
        until = self._backoff_until
        postponed = self._retrying(
            "PostgreSQL",
            lambda: webhook_deliveries_postpone(endpoint_id=self.endpoint_id, until=until, now=now),
        )
        if postponed.given_up_batches:
            with c.lock:
                c.given_up_events += postponed.given_up_events
            logger.warning(
                "webhook endpoint %d: gave up %d kept batch(es) of %d event(s) whose retry window "
                "end before its next try",
                self.endpoint_id,
                postponed.given_up_batches,
                postponed.given_up_events,
            )
        return until

    def _keep(self, items: list[Queued], *, next_attempt_at: float, error: str) -> None:
        if items:
            batches = batches_to_keep(items, size=self._options.batch_size)
            self._keep_batches(
                items, batches, next_attempt_at=next_attempt_at, attempts=0, error=error
            )

    def _keep_batches(
        self,
        items: list[Queued],
        batches: list[BatchToKeep],
        *,
        next_attempt_at: float,
        attempts: int,
        error: str,
        status: int | None = None,
    ) -> None:
        """Keep ``batches`` (made of ``items``) in PostgreSQL, then release the items' holds."""
        keep_endpoint(
            endpoint_id=self.endpoint_id,
            batches=batches,
            items=items,
            now=self._clock(),
            next_attempt_at=next_attempt_at,
            attempts=attempts,
            error=error,
            status=status,
            retry_hours=self._options.retry_hours,
            retrying=self._retrying,
            counters=self._counters,
        )


def keep_endpoint(
    *,
    endpoint_id: int,
    batches: list[BatchToKeep],
    items: Sequence[Queued],
    now: float,
    next_attempt_at: float,
    attempts: int,
    error: str,
    retry_hours: float,
    retrying: Retrying,
    counters: EndpointCounters,
    status: int | None = None,
) -> None:
    """Keep batches of one endpoint in PostgreSQL (waiting through an outage), then release
    their events' Kafka holds. An endpoint deleted meanwhile has nothing to keep them for:
    they are dropped (logged) and released too."""
    try:
        retrying(
            "PostgreSQL",
            lambda: webhook_deliveries_keep(
                endpoint_id=endpoint_id,
                batches=batches,
                now=now,
                next_attempt_at=next_attempt_at,
                attempts=attempts,
                error=error,
                status=status,
                retry_hours=retry_hours,
            ),
        )
    except IntegrityError:
        logger.warning(
            "webhook endpoint %d was deleted: %d event(s) for it dropped", endpoint_id, len(items)
        )
    else:
        with counters.lock:
            counters.kept_events += len(items)
    for q in items:
        q.hold.release()
