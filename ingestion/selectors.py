"""Reads of ingestion: game-server tokens and the consumers' stats."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from leaderboard import keys
from leaderboard.redis import get_board_redis

from .models import GameServerToken
from .stats import ConsumerStats


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
    found = (
        ConsumerStats.from_redis(consumer_id=consumer_id, raw=raw)
        for consumer_id, raw in zip(ids, pipe.execute(), strict=True)
    )
    return [stats for stats in found if stats is not None]
