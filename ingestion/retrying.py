"""Waiting out a dependency: ``Retrying`` with capped exponential backoff.

The consumer hands a ``Backoff`` to the batch handler; every step that needs PostgreSQL, Redis
or Kafka runs through it. An unreachable dependency makes the step wait and run again (every
step is safe to repeat, docs/ingestion.md), logging ``waiting for <what>`` and, once it
answers, ``<what> is back``. A stop request ends the wait with ``ConsumerStopping``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol, TypeVar

import redis
from confluent_kafka import KafkaException
from django.db import DatabaseError, InterfaceError, OperationalError, connection
from kafka.errors import KafkaError

from leaderboard.rank_events import RankEventsNotDelivered
from leaderboard.redis import redis_unavailable

logger = logging.getLogger(__name__)

T = TypeVar("T")


class Retrying(Protocol):
    def __call__(self, what: str, operation: Callable[[], T]) -> T:
        """Run ``operation``; while ``what`` is unreachable, wait and run it again."""


def run_once(what: str, operation: Callable[[], T]) -> T:
    """``Retrying`` that does not retry: the operation runs once (callers without a loop)."""
    return operation()


FIRST_DELAY_SECONDS = 0.1
# Errors that mean "the dependency is unreachable right now", not "this input is bad".
TRANSIENT: tuple[type[BaseException], ...] = (
    OperationalError,
    InterfaceError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    # Refused before anything ran (a script is rejected whole): a replica promoted mid-failover,
    # maxmemory reached. Waiting is the fix; exiting would only restart into the same wait.
    redis.exceptions.ReadOnlyError,
    redis.exceptions.OutOfMemoryError,
    redis.exceptions.TryAgainError,
    KafkaError,
    # The rank events' producer (librdkafka): not acknowledged in time, or a broker error.
    RankEventsNotDelivered,
    KafkaException,
)


def transient(exc: BaseException) -> bool:
    """Whether ``exc`` means a dependency is unreachable right now: TRANSIENT, or what the
    boards' Redis raises down, busy or failing over (``redis_unavailable``: on a cluster,
    CLUSTERDOWN from the surviving masters while a dead one's replica is not yet promoted, a
    slot no master serves, the client's "All slots are not covered"). Those ended the process,
    and the restarted one forgot the lost-writes repair it owed."""
    return isinstance(exc, TRANSIENT) or redis_unavailable(exc)


class ConsumerStopping(Exception):
    """A stop was requested while waiting for a dependency: the batch in hand is abandoned."""


class Backoff:
    """``Retrying`` for the handler: retry transient failures, doubling the wait up to a cap."""

    def __init__(self, *, stop: threading.Event, max_delay: float) -> None:
        self._stop = stop
        self._max_delay = max_delay

    def __call__(self, what: str, operation: Callable[[], T]) -> T:
        delay = FIRST_DELAY_SECONDS
        attempts = 0
        while True:
            try:
                result = operation()
            except Exception as exc:
                if not transient(exc):
                    raise
                if isinstance(exc, DatabaseError):
                    # A broken connection stays broken; the next query opens a fresh one.
                    connection.close()
                attempts += 1
                logger.warning(
                    "waiting for %s (attempt %d, next try in %.1fs): %s: %s",
                    what,
                    attempts,
                    delay,
                    type(exc).__name__,
                    exc,
                )
                if self._stop.wait(delay):
                    raise ConsumerStopping(f"stopped while waiting for {what}") from exc
                delay = min(delay * 2, self._max_delay)
            else:
                if attempts:
                    logger.info("%s is back after %d failed attempt(s)", what, attempts)
                return result
