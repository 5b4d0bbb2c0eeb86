"""The failover repair finds exactly the boards that lost acknowledged writes, and fixes them.

A promoted replica holds a board and its watermark as they were some writes ago. Emulated here
on the real Redis (standalone or cluster): one board's keys are dropped and its watermark put
back below offsets the consumer group has committed. (The real failover, with a SIGKILLed
master, is tests/infra/test_redis_failover_ingest.py.)
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from datetime import timedelta

import pytest
from django.utils import timezone

from ingestion.records import ConsumedRecord, DeadLetter
from ingestion.services import match_results_ingest
from leaderboard import keys
from leaderboard.models import RebuildRun, ScoringRule
from leaderboard.services import boards_lost_writes_repair, weekly_board_build
from seasons.models import SeasonStatus
from tests.helpers import as_board, board_read, day_of, main_board_id, make_live_season, make_season
from tests.ingestion.ingest_helpers import Result, assert_boards_match

pytestmark = pytest.mark.django_db(transaction=True)

TOPIC = "repair-test"


class _Letters:
    def __init__(self) -> None:
        self.letters: list[DeadLetter] = []

    def publish(self, *, letters: Sequence[DeadLetter]) -> None:
        self.letters += letters


def test_only_the_board_behind_committed_offsets_is_rebuilt(board_redis):
    hit = make_season(rule=ScoringRule.CUMULATIVE, status=SeasonStatus.ACTIVE)
    spared = make_season(rule=ScoringRule.CUMULATIVE, status=SeasonStatus.ACTIVE)
    rng = random.Random(4)
    results = [
        Result(
            uuid.uuid4(),
            rng.randint(1, 30),
            season.id,
            rng.randint(0, 100),
            season.starts_at + timedelta(hours=rng.randint(0, 47)),
        )
        for season in (hit, spared)
        for _ in range(150)
    ]
    rng.shuffle(results)
    records = [ConsumedRecord(0, n, r.key(), r.value()) for n, r in enumerate(results)]
    letters = _Letters()
    for start in range(0, len(records), 50):
        match_results_ingest(topic=TOPIC, records=records[start : start + 50], dead_letters=letters)
    assert letters.letters == []
    committed = {0: len(records)}

    # In sync: nothing to repair.
    assert boards_lost_writes_repair(topic=TOPIC, committed=committed) == []

    # "hit" as a replica promoted some writes ago would hold it: board gone, watermark older.
    hit_board = main_board_id(hit.id)
    watermark = keys.ingest_applied_offsets(board_id=hit_board, topic=TOPIC)
    for key in board_redis.scan_iter(match=keys.board_pattern(board_id=hit_board)):
        board_redis.unlink(key)
    board_redis.hset(watermark, "0", 120)

    repaired = boards_lost_writes_repair(topic=TOPIC, committed=committed)

    assert [r.board_id for r in repaired] == [hit_board]
    assert_boards_match(board_redis, hit, [r for r in results if r.season_id == hit.id])
    assert_boards_match(board_redis, spared, [r for r in results if r.season_id == spared.id])
    assert int(board_redis.hget(watermark, "0")) == len(records) - 1
    assert not RebuildRun.objects.filter(board_id=main_board_id(spared.id)).exists()
    # Repaired once: the raised watermark leaves nothing for the next check.
    assert boards_lost_writes_repair(topic=TOPIC, committed=committed) == []


def test_the_repair_rebuilds_the_weekly_boards_of_the_days_it_rebuilt(board_redis):
    """The repair rebuilt the season-long and daily boards only: a weekly board in Redis kept
    what the dead master lost (the late-week mark that would rebuild an older week can be lost
    with the write)."""
    season = make_live_season(days=10, rule=ScoringRule.BEST)
    # Noon: the twenty results, a minute apart, all fall in one ISO week whatever the hour the
    # test runs (from 8 days ago at 23:41 on a Sunday the last ones crossed into Monday's week).
    at = (timezone.now() - timedelta(days=8)).replace(hour=12, minute=0, second=0, microsecond=0)
    results = [
        Result(uuid.uuid4(), player, season.id, 10 * player, at + timedelta(minutes=player))
        for player in range(1, 21)
    ]
    records = [ConsumedRecord(0, n, r.key(), r.value()) for n, r in enumerate(results)]
    letters = _Letters()
    match_results_ingest(topic=TOPIC, records=records, dead_letters=letters)
    assert letters.letters == []
    board = main_board_id(season.id)
    iso_year, iso_week, _ = at.isocalendar()
    weekly = keys.weekly_board(board_id=board, iso_year=iso_year, iso_week=iso_week)
    weekly_board_build(board=as_board(season), iso_year=iso_year, iso_week=iso_week)
    assert set(board_read(board_redis, weekly)) == set(range(1, 21))

    # The promoted replica lacks the last five results everywhere, the weekly board included.
    lost = [str(r.player_id) for r in results[15:]]
    for key in (keys.board(board_id=board), keys.daily_board(board_id=board, day=day_of(at))):
        board_redis.zrem(key, *lost)
    board_redis.zrem(weekly, *lost)
    board_redis.hset(keys.ingest_applied_offsets(board_id=board, topic=TOPIC), "0", 14)

    repaired = boards_lost_writes_repair(topic=TOPIC, committed={0: len(records)})

    assert [r.board_id for r in repaired] == [board]
    assert_boards_match(board_redis, season, results)
    assert set(board_read(board_redis, weekly)) == set(range(1, 21))
