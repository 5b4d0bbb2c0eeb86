"""A new consumer group replays the whole topic from offset 0: nothing changes."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from ingestion.consumer import MatchResultConsumer
from leaderboard.models import MatchResult
from tests.helpers import board_read
from tests.ingestion.ingest_helpers import consumer_options, publish_results

from .fault_helpers import Outcome, make_stream, wait_exact

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_full_replay_by_a_new_group_changes_nothing(topic_and_dlq, board_redis, record) -> None:
    stream = make_stream(count=6_000, players=800, seed=505)
    topic, dlq = topic_and_dlq("replay", partitions=3)
    publish_results(topic, stream.messages)
    first = consumer_options(topic=topic, dead_letter_topic=dlq, max_poll_records=1000)
    totals = MatchResultConsumer(first).run(
        until=lambda t: t.records >= len(stream.messages), max_seconds=90
    )
    assert totals.applied == len(stream.distinct)
    wait_exact(board_redis, stream, since=time.monotonic(), timeout=10)
    boards_before = {key: board_read(board_redis, key) for key in stream.expected}
    rows_before = MatchResult.objects.count()

    # Another group starts at the topic's beginning (auto_offset_reset=earliest).
    replay_started = time.monotonic()
    second = replace(first, group_id=f"{first.group_id}-replay")
    replayed = MatchResultConsumer(second).run(
        until=lambda t: t.records >= len(stream.messages), max_seconds=90
    )
    assert replayed.records == len(stream.messages)
    assert replayed.applied == 0
    exactness = wait_exact(board_redis, stream, since=replay_started, timeout=10)
    assert {key: board_read(board_redis, key) for key in stream.expected} == boards_before
    assert MatchResult.objects.count() == rows_before
    record(
        Outcome.exact(
            "full replay",
            "a new consumer group reads the whole topic again from offset 0",
            stream,
            exactness,
            note="replayed messages applied: 0",
        )
    )
