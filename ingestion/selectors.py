"""Reads of ingestion: game-server tokens and the consumers' stats."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from django.conf import settings

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


def consumer_group_committed_get(*, topic: str, group_id: str) -> dict[int, int]:
    """The group's committed offset (the next to read) per partition of ``topic``; {} when it
    never committed. Raises when Kafka does not answer within seconds.

    The consumer commits a batch only once PostgreSQL stores it and the boards hold it, so
    every result below these offsets is in PostgreSQL: what a recovery raises a rebuilt board's
    watermark to (docs/ingestion.md, "Redis losing data").
    """
    # Imported here so processes that never read offsets (web) pay nothing at start-up.
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(
        bootstrap_servers=list(settings.KAFKA_BOOTSTRAP_SERVERS),
        client_id="leaderboard-recovery",
        request_timeout_ms=5000,
        bootstrap_timeout_ms=5000,
    )
    try:
        offsets = admin.list_group_offsets({group_id: None}).get(group_id, {})
    finally:
        admin.close()
    return {
        tp.partition: int(meta.offset)
        for tp, meta in offsets.items()
        if tp.topic == topic and meta.offset is not None and meta.offset >= 0
    }


def ingest_committed_offsets() -> dict[int, int]:
    """``consumer_group_committed_get`` for the configured topic and group."""
    return consumer_group_committed_get(
        topic=settings.KAFKA_MATCH_RESULTS_TOPIC, group_id=settings.KAFKA_CONSUMER_GROUP
    )
