"""A polled batch in slices: one slice's boards applied on the boards' thread while the next slice
is stored, against real Kafka, PostgreSQL and Redis."""

from __future__ import annotations

import logging
import threading
import uuid
from datetime import timedelta
from typing import Any

import pytest
import redis

from ingestion import consumer as consumer_module
from ingestion.consumer import MatchResultConsumer
from leaderboard.models import ScoringRule
from tests.helpers import make_season

from .ingest_helpers import (
    Result,
    assert_boards_match,
    committed_offsets,
    consumer_options,
    end_offsets,
    publish_results,
)

pytestmark = pytest.mark.django_db(transaction=True)

RESULTS = 400


def _results(season) -> list[Result]:
    start = season.starts_at
    return [
        Result(uuid.uuid4(), 1 + n % 150, season.id, (n * 37) % 1000, start + timedelta(seconds=n))
        for n in range(RESULTS)
    ]


def _consume(options) -> Any:
    return MatchResultConsumer(options).run(
        until=lambda t: t.records >= RESULTS, max_seconds=90
    )


def test_a_slice_is_stored_while_the_slice_before_is_applied_on_the_boards_thread(
    topic_and_dlq, board_redis, monkeypatch
) -> None:
    season = make_season(rule=ScoringRule.BEST)
    topic, dlq = topic_and_dlq("slices", partitions=2)
    results = _results(season)
    publish_results(topic, results)

    boards_running = threading.Event()
    stored_meanwhile = threading.Event()
    calls: list[tuple[str, int]] = []
    real_prepare = consumer_module.match_results_prepare
    real_boards = consumer_module.match_results_boards

    def prepare(**kwargs: Any) -> Any:
        if boards_running.is_set():
            stored_meanwhile.set()
        return real_prepare(**kwargs)

    def boards(**kwargs: Any) -> None:
        calls.append((threading.current_thread().name, kwargs["prepared"].records))
        if len(calls) == 1:
            # The first slice's boards wait for the next slice to be stored: only a consumer
            # that stores it meanwhile lets them go on before the timeout.
            boards_running.set()
            stored_meanwhile.wait(timeout=10)
            boards_running.clear()
        real_boards(**kwargs)

    monkeypatch.setattr(consumer_module, "match_results_prepare", prepare)
    monkeypatch.setattr(consumer_module, "match_results_boards", boards)
    options = consumer_options(
        topic=topic, dead_letter_topic=dlq, slices=2, slice_min_records=1, max_poll_records=5000
    )
    totals = _consume(options)

    assert stored_meanwhile.is_set()
    assert len(calls) >= 2
    assert all(name.startswith("boards") for name, _ in calls), calls
    assert max(size for _, size in calls) < RESULTS
    assert sum(size for _, size in calls) == RESULTS
    assert totals.applied == RESULTS
    assert committed_offsets(topic, options.group_id) == end_offsets(topic)
    assert_boards_match(board_redis, season, results)


def test_a_slice_whose_boards_fail_on_their_thread_is_finished_with_retries(
    topic_and_dlq, board_redis, monkeypatch, caplog
) -> None:
    caplog.set_level(logging.WARNING, logger="ingestion")
    season = make_season(rule=ScoringRule.CUMULATIVE)
    topic, dlq = topic_and_dlq("slices-fail", partitions=2)
    results = _results(season)
    publish_results(topic, results)
    real_boards = consumer_module.match_results_boards
    failed: list[int] = []

    def boards(**kwargs: Any) -> None:
        if not failed:
            # As a Redis cut off mid-apply: the first slice's script calls went out, the
            # replies were lost. The consumer's thread must finish it, and count it once.
            real_boards(**kwargs)
            kwargs["prepared"].applied = None
            failed.append(kwargs["prepared"].records)
            raise redis.ConnectionError("reply lost (test)")
        real_boards(**kwargs)

    monkeypatch.setattr(consumer_module, "match_results_boards", boards)
    options = consumer_options(
        topic=topic, dead_letter_topic=dlq, slices=2, slice_min_records=1, max_poll_records=5000
    )
    totals = _consume(options)

    assert failed
    assert "finishing them with retries" in caplog.text
    # Cumulative: a slice applied twice would add its points twice.
    assert_boards_match(board_redis, season, results)
    assert totals.applied + totals.duplicates == RESULTS
    assert totals.duplicates == failed[0]
    assert committed_offsets(topic, options.group_id) == end_offsets(topic)
