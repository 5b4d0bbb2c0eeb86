"""The consumer stats format: what the consumer writes is what /metrics.json reads."""

from __future__ import annotations

import uuid
from dataclasses import fields, replace

import pytest

from ingestion.selectors import ingest_consumer_stats_list
from ingestion.stats import ConsumerStats, IngestTotals, consumer_stats_publish
from leaderboard import keys


def _stats(**overrides) -> ConsumerStats:
    # Every field distinct, so a field written under one name and read under another fails.
    stats = ConsumerStats(
        consumer_id=f"test-stats-{uuid.uuid4().hex[:12]}",
        topic="match-results-x",
        group_id="group-y",
        applied_per_second=1234.5,
        records=101,
        applied=97,
        duplicates=2,
        dead_letters=1,
        not_counted=3,
        lag=17,
        updated_at=1_760_000_000,
    )
    return replace(stats, **overrides)


def _as_redis_returns(mapping) -> dict[bytes, bytes]:
    return {str(k).encode(): str(v).encode() for k, v in mapping.items()}


def test_the_hash_has_one_field_per_stat() -> None:
    assert set(_stats().to_redis()) == {f.name for f in fields(ConsumerStats)}


@pytest.mark.parametrize("lag", [17, 0, None])
def test_what_is_written_reads_back_equal(lag) -> None:
    stats = _stats(lag=lag)
    raw = _as_redis_returns(stats.to_redis())
    assert ConsumerStats.from_redis(consumer_id=stats.consumer_id, raw=raw) == stats


def test_the_rate_is_carried_at_a_tenth_so_it_survives_the_round_trip() -> None:
    stats = ConsumerStats.from_totals(
        IngestTotals(records=5, applied=4, lag=None),
        consumer_id="c",
        topic="t",
        group_id="g",
        applied_per_second=5234.46,
        updated_at=1,
    )
    assert stats.applied_per_second == 5234.5
    assert stats.to_redis()["applied_per_second"] == "5234.5"
    assert (stats.records, stats.applied, stats.lag) == (5, 4, None)
    raw = _as_redis_returns(stats.to_redis())
    assert ConsumerStats.from_redis(consumer_id="c", raw=raw) == stats


def test_missing_fields_read_as_zero_and_an_unknown_lag() -> None:
    read = ConsumerStats.from_redis(consumer_id="old", raw={b"topic": b"t"})
    assert read == ConsumerStats(
        consumer_id="old",
        topic="t",
        group_id="",
        applied_per_second=0.0,
        records=0,
        applied=0,
        duplicates=0,
        dead_letters=0,
        not_counted=0,
        lag=None,
        updated_at=0,
    )


def test_an_expired_hash_reads_as_none() -> None:
    assert ConsumerStats.from_redis(consumer_id="gone", raw={}) is None


@pytest.mark.parametrize("name", ["records", "lag", "applied_per_second", "updated_at"])
def test_a_garbled_number_is_an_error_not_a_zero(name) -> None:
    raw = _as_redis_returns(_stats().to_redis())
    raw[name.encode()] = b"lots"
    with pytest.raises(ValueError, match="lots"):
        ConsumerStats.from_redis(consumer_id="c", raw=raw)


def test_published_stats_are_listed_for_metrics(board_redis) -> None:
    stats = _stats(lag=None)
    try:
        consumer_stats_publish(stats=stats, ttl_seconds=60)

        [mine] = [s for s in ingest_consumer_stats_list() if s.consumer_id == stats.consumer_id]
        assert mine == stats
        stats_key = keys.ingest_consumer_stats(consumer_id=stats.consumer_id)
        assert 0 < board_redis.ttl(stats_key) <= 60
    finally:
        board_redis.delete(keys.ingest_consumer_stats(consumer_id=stats.consumer_id))
        board_redis.zrem(keys.ingest_consumers(), stats.consumer_id)
