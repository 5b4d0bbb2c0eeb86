"""The deliverers' live figures, through Redis: what each endpoint got from each process.

Every stats interval each ``deliver_webhooks`` process writes one JSON document (its counters
since it started, per endpoint, and what it holds in memory) under its own key with an expiry,
and its id into a registry; the readers (/metrics, the dashboard) sum the processes seen in the
last minutes. A dead deliverer's document expires, so nothing stale is summed. Both sides go
through ``DelivererStats.to_json`` / ``from_json``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, fields
from typing import Any, TypeVar

import orjson

from leaderboard import keys
from leaderboard.redis import get_board_redis

logger = logging.getLogger(__name__)

# A deliverer that has not written stats for this long is gone.
DELIVERER_STALE_SECONDS = 120


@dataclass(frozen=True, slots=True)
class EndpointLive:
    endpoint_id: int
    delivered_events: int
    delivered_batches: int
    failed_attempts: int
    given_up_events: int
    kept_events: int  # events this process kept in PostgreSQL (failed or overflowing)
    queued_events: int  # in memory now, not sent yet
    oldest_queued_at: float | None  # unix time the oldest of those was read from Kafka
    last_success_at: float | None
    last_failure_at: float | None
    last_error: str


@dataclass(frozen=True, slots=True)
class DelivererStats:
    deliverer_id: str
    group_id: str
    topic: str
    updated_at: float
    kafka_lag: int | None  # records of the topic not read yet (None: unknown)
    endpoints: tuple[EndpointLive, ...]

    def to_json(self) -> bytes:
        return orjson.dumps(asdict(self))

    @classmethod
    def from_json(cls, raw: bytes) -> DelivererStats:
        """Read a document written by any version of the deliverer (a rolling deploy runs two
        at once): a field this one does not know is left out, one it lacks takes its empty
        value (0, None, ""). Raises ``ValueError`` on a document that is not such an object."""
        data = orjson.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("deliverer stats: not a JSON object")
        endpoints = tuple(_known(EndpointLive, e) for e in data.get("endpoints") or ())
        return _known(cls, {**data, "endpoints": endpoints})


_EMPTY: dict[str, Any] = {"int": 0, "float": 0.0, "str": ""}
T = TypeVar("T")


def _known(cls: type[T], data: Any) -> T:
    if not isinstance(data, dict):
        raise ValueError(f"deliverer stats: {cls.__name__} is not a JSON object")
    values = {
        f.name: data[f.name] if f.name in data else _EMPTY.get(str(f.type))
        for f in fields(cls)  # type: ignore[arg-type]  # our dataclasses
    }
    return cls(**values)


def deliverer_stats_publish(*, stats: DelivererStats, ttl_seconds: int) -> None:
    """Raises ``redis.RedisError`` when Redis is unreachable (the caller logs and goes on)."""
    client = get_board_redis()
    pipe = client.pipeline(transaction=False)
    pipe.set(
        keys.webhook_deliverer_stats(deliverer_id=stats.deliverer_id),
        stats.to_json(),
        ex=ttl_seconds,
    )
    pipe.zadd(keys.webhook_deliverers(), {stats.deliverer_id: stats.updated_at})
    pipe.execute()


def deliverer_stats_list(*, now: float | None = None) -> list[DelivererStats]:
    """Every deliverer seen in the last ``DELIVERER_STALE_SECONDS``."""
    client = get_board_redis()
    registry = keys.webhook_deliverers()
    now = time.time() if now is None else now
    client.zremrangebyscore(registry, "-inf", now - DELIVERER_STALE_SECONDS)
    members: list[Any] = client.zrange(registry, 0, -1)
    ids = [bytes(raw).decode() for raw in members]
    pipe = client.pipeline(transaction=False)
    for deliverer_id in ids:
        pipe.get(keys.webhook_deliverer_stats(deliverer_id=deliverer_id))
    found: list[DelivererStats] = []
    for deliverer_id, raw in zip(ids, pipe.execute(), strict=True):
        if not raw:
            continue
        try:
            found.append(DelivererStats.from_json(raw))
        except ValueError as exc:
            # One unreadable document must not take every deliverer's figures (and the
            # dashboard) with it.
            logger.warning("deliverer %s: stats unreadable, left out: %s", deliverer_id, exc)
    return found
