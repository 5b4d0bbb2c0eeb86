"""Rebuilds running again and again while the real consumer applies results from Kafka."""

from __future__ import annotations

import random
import threading
import uuid
from datetime import timedelta

import pytest
from django.db import connection

from ingestion.consumer import IngestTotals, MatchResultConsumer
from leaderboard.models import RebuildRun, ScoringRule
from leaderboard.services import board_rebuild
from seasons.models import SeasonStatus
from tests.helpers import main_board_id, make_season, mark_intact
from tests.ingestion.ingest_helpers import (
    Result,
    assert_boards_match,
    consumer_options,
    publish_results,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.slow
def test_results_consumed_during_rebuilds_all_survive(board_redis, topic_and_dlq):
    # Cumulative: a result lost or applied twice changes a sum (best could hide a lost one).
    season = make_season(rule=ScoringRule.CUMULATIVE, status=SeasonStatus.ACTIVE)
    topic, dlq = topic_and_dlq("rebuild-ingest", partitions=2)
    # As a recovery leaves it: the consumer's start-up recovery must not rebuild the board
    # under the test's own rebuilds (it would hold the board's rebuild marker).
    mark_intact(season, topic=topic)
    rng = random.Random(21)
    day = season.starts_at.date()
    results = [
        Result(
            uuid.uuid4(),
            rng.randint(1, 40),  # few players: most results update an existing member
            season.id,
            rng.randint(0, 500),
            season.starts_at + timedelta(hours=rng.randint(0, 47), seconds=rng.randint(0, 3599)),
        )
        for _ in range(1500)
    ]
    publish_results(topic, results)
    options = consumer_options(topic=topic, dead_letter_topic=dlq, max_poll_records=25)
    totals: list[IngestTotals] = []

    def consume() -> None:
        try:
            totals.append(
                MatchResultConsumer(options).run(
                    until=lambda t: t.records >= len(results), max_seconds=120
                )
            )
        finally:
            connection.close()

    consumer = threading.Thread(target=consume)
    consumer.start()
    rebuilds = 0
    while consumer.is_alive():
        board_rebuild(board_id=main_board_id(season.id))
        board_rebuild(board_id=main_board_id(season.id), day=day)
        rebuilds += 1
    consumer.join()
    assert totals
    assert totals[0].records == len(results)
    assert rebuilds >= 2
    # Some rebuilds really overlapped ingestion: writes went through their delta.
    assert RebuildRun.objects.filter(delta_members__gt=0).exists()
    # No rebuild after the consumer stopped: every result applied during one survived its RENAME.
    assert_boards_match(board_redis, season, results)
