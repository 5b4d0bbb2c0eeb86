"""match_results_ingest on hand-made batches: the redelivery cases Kafka ordering can't pin down."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta

import pytest

from ingestion import services
from ingestion.models import MatchResult
from ingestion.schema import message_decode
from ingestion.services import (
    ConsumedRecord,
    DeadLetter,
    ValidResult,
    match_results_ingest,
    match_results_store,
)
from seasons.models import ScoringRule
from tests.helpers import make_season

from .ingest_helpers import Result, assert_boards_match

pytestmark = pytest.mark.django_db(transaction=True)

TOPIC = "service-test"


class _Letters:
    def __init__(self) -> None:
        self.letters: list[DeadLetter] = []

    def publish(self, *, letters: Sequence[DeadLetter]) -> None:
        self.letters += letters


def _record(result: Result, partition: int, offset: int) -> ConsumedRecord:
    return ConsumedRecord(partition, offset, result.key(), result.value())


def test_a_result_stored_by_its_second_message_before_a_crash_is_applied_once(
    board_redis,
) -> None:
    season = make_season(rule=ScoringRule.CUMULATIVE)
    result = Result(uuid.uuid4(), 9, season.id, 40, season.starts_at + timedelta(hours=5))
    other = Result(uuid.uuid4(), 9, season.id, 2, season.starts_at + timedelta(hours=6))
    # Two messages carry the same result (a game-server retry) on two partitions. The second
    # one's consumer stored it, then died before Redis.
    match_results_store(results=[ValidResult(1, 20, message_decode(result.value()))])

    # The redelivery meets the first message before the one that stored the row.
    batch = [_record(result, 0, 10), _record(other, 0, 11), _record(result, 1, 20)]
    outcome = match_results_ingest(topic=TOPIC, records=batch, dead_letters=_Letters())
    again = match_results_ingest(topic=TOPIC, records=batch, dead_letters=_Letters())

    assert (outcome.applied, outcome.duplicates) == (2, 1)
    assert (again.applied, again.duplicates) == (0, 3)
    assert MatchResult.objects.count() == 2
    assert_boards_match(board_redis, season, [result, other])


def test_the_same_result_twice_in_one_batch_counts_once(board_redis) -> None:
    season = make_season(rule=ScoringRule.CUMULATIVE)
    result = Result(uuid.uuid4(), 3, season.id, 15, season.starts_at + timedelta(hours=1))
    batch = [_record(result, 1, 7), _record(result, 0, 3), _record(result, 1, 8)]

    outcome = match_results_ingest(topic=TOPIC, records=batch, dead_letters=_Letters())

    assert (outcome.applied, outcome.duplicates) == (1, 2)
    assert_boards_match(board_redis, season, [result])


def test_a_message_that_breaks_validation_unexpectedly_is_dead_lettered(
    board_redis, monkeypatch
) -> None:
    season = make_season(rule=ScoringRule.BEST)
    good = [
        Result(uuid.uuid4(), n, season.id, 10 * n, season.starts_at + timedelta(hours=n))
        for n in (1, 2)
    ]
    poison = b'{"poison": true}'
    real_decode = services.message_decode

    def decode(raw: bytes | None):
        if raw == poison:
            raise RuntimeError("a case the checks did not foresee")
        return real_decode(raw)

    monkeypatch.setattr(services, "message_decode", decode)
    letters = _Letters()
    batch = [_record(good[0], 0, 1), ConsumedRecord(0, 2, b"x", poison), _record(good[1], 0, 3)]

    outcome = match_results_ingest(topic=TOPIC, records=batch, dead_letters=letters)

    assert (outcome.applied, outcome.dead_letters) == (2, 1)
    [letter] = letters.letters
    assert (letter.code, letter.record.value) == ("unexpected_error", poison)
    assert "did not foresee" in letter.reason
    assert_boards_match(board_redis, season, good)
