"""Dependency checks behind /healthz: each makes a real round trip, with a short timeout."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection

from leaderboard.redis import board_redis_ping
from leaderboard.selectors.boards import board_list_open
from leaderboard.services import boards_lost_get, boards_recovering_get


@dataclass(frozen=True, slots=True)
class DependencyState:
    name: str
    ok: bool
    latency_ms: float
    error: str = ""


def _check_postgres() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


def _check_redis() -> None:
    board_redis_ping()


# One admin client per process (and per fork, and per bootstrap list): a new client per check
# would open and close broker connections on every probe of a load balancer.
_kafka_admins: dict[tuple[int, tuple[str, ...]], Any] = {}
_kafka_lock = threading.Lock()


def _check_kafka() -> None:
    # A real metadata request; imported lazily so web processes that never touch Kafka pay
    # nothing at start-up.
    from kafka import KafkaAdminClient

    key = (os.getpid(), tuple(settings.KAFKA_BOOTSTRAP_SERVERS))
    with _kafka_lock:
        client = _kafka_admins.get(key)
        if client is None:
            client = _kafka_admins[key] = KafkaAdminClient(
                bootstrap_servers=list(key[1]),
                client_id="leaderboard-healthz",
                request_timeout_ms=2000,
                bootstrap_timeout_ms=2000,
            )
        try:
            client.list_topics()
        except Exception:
            # Start over next time: a client that failed may hold a broken connection.
            del _kafka_admins[key]
            client.close()
            raise


CHECKS: dict[str, Callable[[], None]] = {
    "postgres": _check_postgres,
    "redis": _check_redis,
    "kafka": _check_kafka,
}


def dependencies_check() -> list[DependencyState]:
    states = []
    for name, check in CHECKS.items():
        started = time.perf_counter()
        try:
            check()
        except Exception as exc:
            states.append(
                DependencyState(
                    name,
                    False,
                    (time.perf_counter() - started) * 1000,
                    f"{type(exc).__name__}: {exc}",
                )
            )
        else:
            states.append(DependencyState(name, True, (time.perf_counter() - started) * 1000))
    return states


@dataclass(frozen=True, slots=True)
class BoardsState:
    missing: tuple[int, ...]  # board ids Redis does not hold as truth (reads answer 503)
    recovering: tuple[int, ...]  # of those, the ones a recovery is rebuilding now
    error: str = ""  # the check itself failed (a dependency down: see dependencies)


def boards_check() -> BoardsState:
    """Which boards Redis lost (their reads answer 503 until the recovery task rebuilt them)."""
    try:
        boards = board_list_open()
        missing = boards_lost_get(boards=boards)
        recovering = boards_recovering_get(boards=[b for b in boards if b.id in missing])
    except Exception as exc:
        return BoardsState((), (), f"{type(exc).__name__}: {exc}")
    return BoardsState(tuple(sorted(missing)), tuple(sorted(recovering)))


@dataclass(frozen=True, slots=True)
class HealthState:
    dependencies: list[DependencyState]
    boards: BoardsState


_public_lock = threading.Lock()
_public: tuple[float, HealthState] | None = None


def health_check() -> HealthState:
    return HealthState(dependencies_check(), boards_check())


def health_check_shared() -> HealthState:
    """``health_check``, shared by the requests of this process for HEALTHZ_PUBLIC_CACHE_SECONDS:
    anyone may ask /healthz as often as they like, and each ask costs PostgreSQL, Redis and a
    Kafka metadata request a round trip; shared, a flood costs them one round per process per
    period. The operators' detailed answers check afresh."""
    global _public
    ttl = settings.HEALTHZ_PUBLIC_CACHE_SECONDS
    if ttl <= 0:
        return health_check()
    with _public_lock:  # one check at a time: the others take its answer
        now = time.monotonic()
        if _public is None or now - _public[0] >= ttl:
            _public = (now, health_check())
        return _public[1]
