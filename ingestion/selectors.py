"""Reads of ingestion: game-server tokens and the consumers' stats."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from leaderboard import keys
from leaderboard.redis import get_board_redis

from .models import GameServerToken


def game_server_token_digest(*, raw_token: str) -> str:
    """Tokens are stored as this digest only: a database leak does not leak credentials."""
    return hashlib.sha256(raw_token.encode("utf-8")).hexdigest()


def game_server_token_get(*, raw_token: str) -> GameServerToken | None:
    """The token whose digest matches ``raw_token`` (active or not), or None."""
    digest = game_server_token_digest(raw_token=raw_token)
    return GameServerToken.objects.filter(token_digest=digest).first()


# --- Consumer stats (written by ingestion.consumer every stats interval) -------------------------

# A consumer that has not written stats for this long is gone (its hash expires on its own too).
CONSUMER_STALE_SECONDS = 300


@dataclass(frozen=True, slots=True)
class ConsumerStats:
    consumer_id: str
    topic: str
    group_id: str
    applied_per_second: float
    records: int
    applied: int
    duplicates: int
    dead_letters: int
    not_counted: int
    lag: int | None
    updated_at: int


def _int(raw: bytes | None) -> int:
    return int(raw) if raw else 0


def ingest_consumer_stats_list() -> list[ConsumerStats]:
    """The counters of every consumer process seen recently, by consumer id."""
    client = get_board_redis()
    registry = keys.ingest_consumers()
    client.zremrangebyscore(
        registry, "-inf", datetime.now(UTC).timestamp() - CONSUMER_STALE_SECONDS
    )
    members: list[Any] = client.zrange(registry, 0, -1)
    ids = [bytes(raw).decode() for raw in members]
    pipe = client.pipeline(transaction=False)
    for consumer_id in ids:
        pipe.hgetall(keys.ingest_consumer_stats(consumer_id=consumer_id))
    stats = []
    for consumer_id, raw in zip(ids, pipe.execute(), strict=True):
        if not raw:
            continue
        stats.append(
            ConsumerStats(
                consumer_id=consumer_id,
                topic=raw.get(b"topic", b"").decode(),
                group_id=raw.get(b"group_id", b"").decode(),
                applied_per_second=float(raw.get(b"applied_per_second") or 0),
                records=_int(raw.get(b"records")),
                applied=_int(raw.get(b"applied")),
                duplicates=_int(raw.get(b"duplicates")),
                dead_letters=_int(raw.get(b"dead_letters")),
                not_counted=_int(raw.get(b"not_counted")),
                lag=int(raw[b"lag"]) if raw.get(b"lag") else None,
                updated_at=_int(raw.get(b"updated_at")),
            )
        )
    return stats
