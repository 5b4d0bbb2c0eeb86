"""The failover watch repairs lost writes before a retried batch can hide them.

A Redis that failed over may have lost writes it had acknowledged (offsets the group has
committed). The batch the consumer retries after the failure must not reach the promoted
replica first: its apply would raise the board's watermark past the lost offsets, and the
repair, comparing watermarks with committed offsets, would find nothing. Emulated on the real
Redis, PostgreSQL and Kafka as tests/leaderboard/test_lost_writes_repair.py does: the board's
keys dropped and its watermark put back below the committed offsets, the watch told the masters
were others before, and the retried batch's first attempt at the boards failing.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest
import redis
from django.db import OperationalError
from kafka import KafkaConsumer
from kafka.structs import OffsetAndMetadata, TopicPartition

from ingestion.board_redis_watch import BoardRedisWatch
from ingestion.records import ConsumedRecord, DeadLetter
from ingestion.services import batch as batch_module
from ingestion.services import match_results_ingest
from leaderboard import keys
from leaderboard.models import ScoringRule
from leaderboard.services import RebuildInProgressError
from seasons.models import SeasonStatus
from tests.helpers import main_board_id, make_season
from tests.ingestion.ingest_helpers import assert_boards_match, seeded_results

pytestmark = pytest.mark.django_db(transaction=True)


class _Letters:
    def __init__(self) -> None:
        self.letters: list[DeadLetter] = []

    def publish(self, *, letters: Sequence[DeadLetter]) -> None:
        self.letters += letters


def _retry_at_once(what: str, operation):
    """The consumer's retrying without its waits."""
    while True:
        try:
            return operation()
        except redis.ConnectionError:
            continue


def test_a_batch_retried_after_a_failover_waits_for_the_lost_writes_repair(
    board_redis, kafka_topic_factory, kafka_bootstrap, monkeypatch
) -> None:
    season = make_season(rule=ScoringRule.CUMULATIVE, status=SeasonStatus.ACTIVE)
    topic = kafka_topic_factory("watch-repair")
    results = seeded_results(season, 200, players=30, seed=8)
    records = [ConsumedRecord(0, n, r.key(), r.value()) for n, r in enumerate(results)]
    letters = _Letters()
    for start in range(0, 150, 50):
        match_results_ingest(topic=topic, records=records[start : start + 50], dead_letters=letters)
    # The group committed offsets 0..149.
    consumer = KafkaConsumer(
        bootstrap_servers=kafka_bootstrap,
        group_id=f"watch-repair-{uuid.uuid4().hex[:8]}",
        enable_auto_commit=False,
    )
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.commit({partition: OffsetAndMetadata(150, "", -1)})
        watch = BoardRedisWatch(topic=topic, interval_seconds=3600)
        watch.observe(consumer)
        # A failover that lost the writes of offsets 100..149: the promoted replica's board
        # as it was (emulated: gone), its watermark older; the masters others than before.
        board_id = main_board_id(season.id)
        for key in board_redis.scan_iter(match=keys.board_pattern(board_id=board_id)):
            board_redis.unlink(key)
        board_redis.hset(keys.ingest_applied_offsets(board_id=board_id, topic=topic), "0", 99)
        watch._masters = frozenset({"the master before the failover"})

        # The next batch's first attempt at the boards fails (the dead master), the second
        # reaches the promoted replica.
        real_apply = batch_module.board_groups_apply
        calls = []

        def failing_once(**kwargs):
            calls.append(kwargs)
            if len(calls) == 1:
                raise redis.ConnectionError("the master is gone")
            return real_apply(**kwargs)

        monkeypatch.setattr(batch_module, "board_groups_apply", failing_once)
        match_results_ingest(
            topic=topic,
            records=records[150:],
            dead_letters=letters,
            retrying=_retry_at_once,
            boards_failed=lambda: watch.before_boards_retry(consumer),
        )
    finally:
        consumer.close(autocommit=False)

    assert len(calls) == 2
    assert letters.letters == []
    # Repaired before the retry: every result is on the board, the lost ones too.
    assert_boards_match(board_redis, season, results)


@pytest.mark.parametrize(
    "cannot_run",
    [
        RebuildInProgressError("a rebuild of the board is running"),
        # PostgreSQL away a moment: the process ended on it, and the repair owed was forgotten.
        OperationalError("connection to server at 127.0.0.1 failed"),
    ],
    ids=["rebuild", "postgresql"],
)
def test_a_retry_waits_while_the_repair_cannot_run(
    board_redis, kafka_topic_factory, kafka_bootstrap, monkeypatch, cannot_run
) -> None:
    topic = kafka_topic_factory("watch-wait")
    consumer = KafkaConsumer(
        bootstrap_servers=kafka_bootstrap,
        group_id=f"watch-wait-{uuid.uuid4().hex[:8]}",
        enable_auto_commit=False,
    )
    try:
        watch = BoardRedisWatch(topic=topic, interval_seconds=3600)
        watch.observe(consumer)
        # Unchanged masters: nothing owed, the retry goes ahead.
        watch.before_boards_retry(consumer)
        watch._masters = frozenset({"the master before the failover"})

        def busy(**kwargs):
            raise cannot_run

        monkeypatch.setattr("ingestion.board_redis_watch.boards_lost_writes_repair", busy)
        with pytest.raises(redis.ConnectionError, match="lost-writes repair owed"):
            watch.before_boards_retry(consumer)
        # Still owed at the next retry, until the repair runs.
        with pytest.raises(redis.ConnectionError):
            watch.before_boards_retry(consumer)
        monkeypatch.setattr(
            "ingestion.board_redis_watch.boards_lost_writes_repair", lambda **kwargs: []
        )
        watch.before_boards_retry(consumer)
    finally:
        consumer.close(autocommit=False)
