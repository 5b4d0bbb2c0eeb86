"""match_results_ingest on hand-made batches: the redelivery cases Kafka ordering can't pin down."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta

import psycopg
import pytest
from django.db import IntegrityError, connection, transaction
from django.db.models import ProtectedError

from ingestion.records import ConsumedRecord, DeadLetter
from ingestion.schema import UNKNOWN_SEASON
from ingestion.services import batch as batch_handler
from ingestion.services import match_results_ingest
from leaderboard import keys
from leaderboard.models import MatchResult, PlayerBan, ScoringRule
from leaderboard.services import ResultColumns, match_results_store
from seasons.models import Season
from tests.helpers import main_board_id, make_season, subprocess_database_url

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
    match_results_store(results=ResultColumns.of([result.row(partition=1, offset=20)]))

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


def test_a_redelivery_is_refused_by_the_apply_script_and_counted_as_duplicates(
    board_redis,
) -> None:
    """The script alone decides what its board already holds: the redelivered batch goes to it
    whole, is refused for the watermark the first delivery moved, and nothing is doubled. A
    banned player's result goes to no script call: not counted, on every delivery."""
    season = make_season(rule=ScoringRule.CUMULATIVE)
    PlayerBan.objects.create(season=season, player_id=66, reason="cheating")
    results = [
        Result(uuid.uuid4(), player, season.id, 5, season.starts_at + timedelta(hours=1))
        for player in (1, 2, 66)
    ]
    batch = [_record(result, 0, 30 + n) for n, result in enumerate(results)]
    watermark = keys.ingest_applied_offsets(board_id=main_board_id(season.id), topic=TOPIC)

    first = match_results_ingest(topic=TOPIC, records=batch, dead_letters=_Letters())
    again = match_results_ingest(topic=TOPIC, records=batch, dead_letters=_Letters())

    assert (first.applied, first.duplicates, first.not_counted) == (2, 0, 1)
    assert (again.applied, again.duplicates, again.not_counted) == (0, 2, 1)
    assert board_redis.hget(watermark, "0") == b"32"
    assert_boards_match(board_redis, season, results[:2])


def test_a_message_that_breaks_validation_unexpectedly_is_dead_lettered(
    board_redis, monkeypatch
) -> None:
    season = make_season(rule=ScoringRule.BEST)
    good = [
        Result(uuid.uuid4(), n, season.id, 10 * n, season.starts_at + timedelta(hours=n))
        for n in (1, 2)
    ]
    poison = b'{"poison": true}'
    real_decode = batch_handler.message_decode

    def decode(raw: bytes | None):
        if raw == poison:
            raise RuntimeError("a case the checks did not foresee")
        return real_decode(raw)

    monkeypatch.setattr(batch_handler, "message_decode", decode)
    letters = _Letters()
    batch = [_record(good[0], 0, 1), ConsumedRecord(0, 2, b"x", poison), _record(good[1], 0, 3)]

    outcome = match_results_ingest(topic=TOPIC, records=batch, dead_letters=letters)

    assert (outcome.applied, outcome.dead_letters) == (2, 1)
    [letter] = letters.letters
    assert (letter.code, letter.record.value) == ("unexpected_error", poison)
    assert "did not foresee" in letter.reason
    assert_boards_match(board_redis, season, good)


# --- the season reference, checked per batch instead of per row ----------------------------------


def test_a_season_deleted_between_validation_and_storing_turns_its_results_into_dead_letters(
    board_redis,
) -> None:
    kept, doomed = make_season(), make_season()
    stays = Result(uuid.uuid4(), 1, kept.id, 10, kept.starts_at + timedelta(hours=1))
    orphan = Result(uuid.uuid4(), 2, doomed.id, 20, doomed.starts_at + timedelta(hours=1))
    letters = _Letters()
    steps: list[str] = []

    def delete_before_the_first_store(what, operation):
        # Validation and storing are separate steps: staff delete the season in between.
        steps.append(what)
        if len(steps) == 2:
            doomed.delete()
        return operation()

    outcome = match_results_ingest(
        topic=TOPIC,
        records=[_record(stays, 0, 1), _record(orphan, 0, 2)],
        dead_letters=letters,
        retrying=delete_before_the_first_store,
    )

    assert (outcome.applied, outcome.dead_letters) == (1, 1)
    assert [(letter.record.offset, letter.code) for letter in letters.letters] == [
        (2, UNKNOWN_SEASON)
    ]
    assert list(MatchResult.objects.values_list("match_id", flat=True)) == [stays.match_id]
    assert_boards_match(board_redis, kept, [stays])


def test_a_season_with_results_cannot_be_deleted_or_renumbered_even_in_sql() -> None:
    season = make_season()
    result = Result(uuid.uuid4(), 1, season.id, 10, season.starts_at + timedelta(hours=1))
    match_results_store(results=ResultColumns.of([result.row(partition=0, offset=1)]))

    with pytest.raises(ProtectedError):
        season.delete()
    for statement in (
        f"DELETE FROM {Season._meta.db_table} WHERE id = %s",  # noqa: S608
        f"UPDATE {Season._meta.db_table} SET id = id + 1000000 WHERE id = %s",  # noqa: S608
    ):
        with (
            pytest.raises(IntegrityError, match="has match results"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute(statement, [season.id])
    # Renaming is still fine, and a season without results can go.
    Season.objects.filter(pk=season.pk).update(name="renamed")
    make_season().delete()


def test_a_batch_being_stored_holds_off_a_season_delete_which_then_fails() -> None:
    """The per-batch lock does what the per-row check did: the delete waits for the batch's
    commit and is then refused, instead of leaving results without their season."""
    season = make_season()
    result = Result(uuid.uuid4(), 1, season.id, 10, season.starts_at + timedelta(hours=1))
    delete = f"DELETE FROM {Season._meta.db_table} WHERE id = %s"  # noqa: S608
    other = psycopg.connect(subprocess_database_url(), autocommit=True)
    try:
        with transaction.atomic():
            match_results_store(results=ResultColumns.of([result.row(partition=0, offset=1)]))
            other.execute("SET lock_timeout = '200ms'")
            with pytest.raises(psycopg.errors.LockNotAvailable):
                other.execute(delete, [season.id])
        with pytest.raises(psycopg.errors.ForeignKeyViolation, match="has match results"):
            other.execute(delete, [season.id])
    finally:
        other.close()
    assert Season.objects.filter(pk=season.pk).exists()
