"""``manage.py consume_match_results`` as a real process: SIGKILL mid-batch, SIGTERM."""

from __future__ import annotations

import random
import signal
import time
import uuid
from dataclasses import replace
from datetime import timedelta
from functools import partial

import pytest
from django.db.models import Max

from ingestion.consumer import MatchResultConsumer
from leaderboard.models import MatchResult, ScoringRule
from tests.helpers import make_season, wait_until

from .ingest_helpers import (
    ConsumerProcess,
    Result,
    assert_boards_match,
    committed_offsets,
    consumer_options,
    end_offsets,
    publish_results,
    unique_results,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _results(season, *, count: int, players: int, seed: int) -> list[Result]:
    rng = random.Random(seed)
    results = [
        Result(
            uuid.uuid4(),
            rng.randint(1, players),
            season.id,
            rng.randint(0, 5000),
            season.starts_at + timedelta(seconds=rng.randint(0, 4 * 86400)),
        )
        for _ in range(count)
    ]
    # Game-server retries: some results published twice, some of them much later.
    results += rng.sample(results, count // 20)
    return results


def _rows() -> int:
    return MatchResult.objects.count()


def _rows_reach(target: int) -> bool:
    return _rows() >= target


def _done(topic: str, group: str) -> bool:
    return committed_offsets(topic, group) == end_offsets(topic)


def test_sigkill_at_random_points_then_restart_counts_everything_once(
    topic_and_dlq, board_redis, tmp_path
) -> None:
    season = make_season(rule=ScoringRule.CUMULATIVE)
    topic, dlq = topic_and_dlq("crash", partitions=3)
    messages = _results(season, count=30_000, players=3_000, seed=11)
    distinct = unique_results(messages)
    publish_results(topic, messages)
    group = f"test-crash-{uuid.uuid4().hex[:8]}"
    process = ConsumerProcess(topic=topic, dlq=dlq, group=group, log=tmp_path / "consumer.log")
    rng = random.Random(3)

    kills_mid_ingest = 0
    for _ in range(5):
        # Kill while it ingests: once it has stored a bit more than last time, at a random moment.
        stored_before = _rows()
        process.start()
        target = min(len(distinct) - 1, stored_before + rng.randint(1, 4000))
        wait_until(partial(_rows_reach, target), timeout=60, every=0.005, context=process.log_tail)
        # Jitter, not synchronisation: land anywhere between the PostgreSQL commit and the next.
        time.sleep(rng.random() * 0.05)
        assert process.signal(signal.SIGKILL) == -signal.SIGKILL
        if 0 < _rows() < len(distinct):
            kills_mid_ingest += 1
    assert kills_mid_ingest >= 3, "the kills must land while results are being ingested"

    process.start()
    wait_until(lambda: _done(topic, group), timeout=90, every=0.2, context=process.log_tail)
    assert process.signal(signal.SIGTERM) == 0

    assert _rows() == len(distinct)
    assert set(MatchResult.objects.values_list("match_id", "player_id", "points")) == {
        (r.match_id, r.player_id, r.points) for r in distinct
    }
    assert_boards_match(board_redis, season, distinct)


def test_sigterm_finishes_and_commits_the_batch_in_hand(
    topic_and_dlq, board_redis, tmp_path
) -> None:
    season = make_season(rule=ScoringRule.CUMULATIVE)
    topic, dlq = topic_and_dlq("term", partitions=2)
    messages = _results(season, count=8_000, players=500, seed=5)
    distinct = unique_results(messages)
    publish_results(topic, messages)
    group = f"test-term-{uuid.uuid4().hex[:8]}"
    process = ConsumerProcess(topic=topic, dlq=dlq, group=group, log=tmp_path / "consumer.log")

    process.start()
    wait_until(lambda: _rows() > 0, timeout=60, every=0.005, context=process.log_tail)
    assert process.signal(signal.SIGTERM) == 0
    assert "consumer stopped" in (tmp_path / "consumer.log").read_text()

    # The batch in hand was finished and committed: every stored offset is below the commit.
    committed = committed_offsets(topic, group)
    stored = MatchResult.objects.values("kafka_partition").annotate(last=Max("kafka_offset"))
    assert stored
    for row in stored:
        partition = row["kafka_partition"]
        assert partition is not None
        assert row["last"] < (committed[partition] or 0), (row, committed)
    remaining = sum(end_offsets(topic).values()) - sum(o or 0 for o in committed.values())
    # The same static member id: it takes the partitions back at once (a new member would wait
    # for the departed static member's session to time out).
    options = replace(
        consumer_options(topic=topic, dead_letter_topic=dlq),
        group_id=group,
        group_instance_id=f"{group}-0",
    )
    totals = MatchResultConsumer(options).run(
        until=lambda t: t.records >= remaining, max_seconds=90
    )
    assert totals.records == remaining
    assert_boards_match(board_redis, season, distinct)
