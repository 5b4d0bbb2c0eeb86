"""Consumer stats: the running totals of one consumer process, and the one Redis format of them.

Every stats interval the consumer (the writer) publishes a ``ConsumerStats`` to the hash
``lb:ingest:stats:<consumer id>`` and its id to the ``lb:ingest:consumers`` registry;
/metrics.json (the reader, ``ingestion.selectors.ingest_consumer_stats_list``) reads them back.
Both sides go through ``ConsumerStats.to_redis`` / ``ConsumerStats.from_redis``, so a field
added, renamed or re-typed on one side cannot silently read as 0 on the other.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from redis.typing import EncodableT, FieldT

from leaderboard import keys
from leaderboard.redis import get_board_redis

from .history import history_sample_add


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    records: int
    applied: int  # results that now count on the boards
    duplicates: int  # results already stored (or already applied) before
    dead_letters: int
    not_counted: int  # stored but excluded: voided, banned, or a cumulative overflow
    # Player profiles (their own topic, or a match result's displayName): never in the counts
    # above, which are match results'.
    profiles: int = 0  # profile records of the player-profiles topic
    profiles_dead_letters: int = 0
    names_skipped: int = 0  # match results whose displayName was invalid (the result counts)
    rank_events: int = 0  # rank events published to Kafka (docs/events.md)


@dataclass(slots=True)
class IngestTotals:
    """What one consumer process has done since it started (mutable: the loop adds to it)."""

    records: int = 0
    applied: int = 0
    duplicates: int = 0
    dead_letters: int = 0
    not_counted: int = 0
    profiles: int = 0
    profiles_dead_letters: int = 0
    names_skipped: int = 0
    rank_events: int = 0
    batches: int = 0
    lag: int | None = None
    # Next offset to read per partition (what was committed last).
    positions: dict[int, int] = field(default_factory=dict)

    def add(self, outcome: BatchOutcome) -> None:
        self.records += outcome.records
        self.applied += outcome.applied
        self.duplicates += outcome.duplicates
        self.dead_letters += outcome.dead_letters
        self.not_counted += outcome.not_counted
        self.profiles += outcome.profiles
        self.profiles_dead_letters += outcome.profiles_dead_letters
        self.names_skipped += outcome.names_skipped
        self.rank_events += outcome.rank_events
        self.batches += 1


@dataclass(frozen=True, slots=True)
class ConsumerStats:
    """One consumer's published counters, as /metrics.json serves them."""

    consumer_id: str
    topic: str
    group_id: str
    # Carried at 0.1 resolution (what the hash stores), so a round trip gives back an equal value.
    applied_per_second: float
    records: int
    applied: int
    duplicates: int
    dead_letters: int
    not_counted: int
    lag: int | None  # None: unknown (no partition assigned yet, or Kafka unreachable)
    updated_at: int  # unix seconds of the write

    @classmethod
    def from_totals(
        cls,
        totals: IngestTotals,
        *,
        consumer_id: str,
        topic: str,
        group_id: str,
        applied_per_second: float,
        updated_at: int,
    ) -> ConsumerStats:
        return cls(
            consumer_id=consumer_id,
            topic=topic,
            group_id=group_id,
            applied_per_second=round(applied_per_second, 1),
            records=totals.records,
            applied=totals.applied,
            duplicates=totals.duplicates,
            dead_letters=totals.dead_letters,
            not_counted=totals.not_counted,
            lag=totals.lag,
            updated_at=updated_at,
        )

    def to_redis(self) -> dict[FieldT, EncodableT]:
        """The hash fields: every field of the dataclass, an unknown lag as an empty string."""
        mapping: dict[FieldT, EncodableT] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "applied_per_second":
                value = f"{value:.1f}"
            elif value is None:
                value = ""
            mapping[f.name] = value
        return mapping

    @classmethod
    def from_redis(cls, *, consumer_id: str, raw: Mapping[bytes, bytes]) -> ConsumerStats | None:
        """Read a hash written by ``to_redis``; None when it is gone (it expired).

        The id comes from the registry, not the hash: it is the key the hash was found under.
        A missing counter reads as 0 and a missing or empty lag as unknown (a hash written by an
        older consumer lacks the newer fields). A field that is present but not a number raises
        ``ValueError``: only a foreign writer produces one, and hiding it would serve wrong
        figures.
        """
        if not raw:
            return None
        lag = raw.get(b"lag")
        return cls(
            consumer_id=consumer_id,
            topic=raw.get(b"topic", b"").decode(),
            group_id=raw.get(b"group_id", b"").decode(),
            applied_per_second=float(raw.get(b"applied_per_second") or 0),
            records=_int(raw.get(b"records")),
            applied=_int(raw.get(b"applied")),
            duplicates=_int(raw.get(b"duplicates")),
            dead_letters=_int(raw.get(b"dead_letters")),
            not_counted=_int(raw.get(b"not_counted")),
            lag=int(lag) if lag else None,
            updated_at=_int(raw.get(b"updated_at")),
        )


def _int(raw: bytes | None) -> int:
    return int(raw) if raw else 0


def consumer_stats_publish(*, stats: ConsumerStats, ttl_seconds: int) -> None:
    """Write ``stats`` to its hash, mark the consumer alive in the registry and append the sample
    to the last hour's history (one round trip).

    The hash expires after ``ttl_seconds``: a consumer that died stops refreshing its stats and
    they vanish on their own. Raises ``redis.RedisError`` when Redis is unreachable.
    """
    client = get_board_redis()
    stats_key = keys.ingest_consumer_stats(consumer_id=stats.consumer_id)
    pipe = client.pipeline(transaction=False)
    pipe.hset(stats_key, mapping=stats.to_redis())
    pipe.expire(stats_key, ttl_seconds)
    pipe.zadd(keys.ingest_consumers(), {stats.consumer_id: time.time()})
    history_sample_add(
        pipe,
        consumer_id=stats.consumer_id,
        at=stats.updated_at,
        applied_per_second=stats.applied_per_second,
        lag=stats.lag,
        dead_letters=stats.dead_letters,
    )
    pipe.execute()
