from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
import redis
from django.conf import settings as django_settings
from django.utils import timezone

from leaderboard import keys
from leaderboard.models import MatchResult, ReconcileRun, ScoringRule
from leaderboard.redis import get_board_redis
from leaderboard.services import (
    board_reconcile,
    boards_reconcile_live_seasons,
    boards_recover,
    reconcile_days,
)
from seasons.models import SeasonStatus
from tests.helpers import expected_board, main_board_id, make_season
from tests.leaderboard import live

pytestmark = pytest.mark.django_db(transaction=True)

# A Redis database this suite alone uses, so "Redis lost everything" can be a real FLUSHDB
# without touching anyone else's keys (db 0/1/2 are shared and are never flushed).
OWN_DB_URL = "redis://127.0.0.1:6379/9"


@pytest.fixture
def own_redis(settings):
    if settings.LB_REDIS_MODE == "cluster":
        # A cluster has one database, shared by every test: this test's keys (its own prefix)
        # are all it can lose; the session's cleanup drops what is left.
        yield get_board_redis()
        return
    settings.CACHES = {
        **django_settings.CACHES,
        "boards": {**django_settings.CACHES["boards"], "LOCATION": OWN_DB_URL},
    }
    client = get_board_redis()
    assert isinstance(client, redis.Redis)
    assert client.connection_pool.connection_kwargs["db"] == 9
    yield client
    client.flushdb()


def _lose_everything(client) -> None:
    """Redis loses every key of this test: FLUSHDB of db 9, or on a cluster the test's keys."""
    if django_settings.LB_REDIS_MODE != "cluster":
        client.flushdb()  # db 9 only: this suite's own database
        return
    for key in client.scan_iter(match=keys.prefix_pattern(), count=1000):
        client.unlink(key)
    assert not list(client.scan_iter(match=keys.prefix_pattern()))


def _populate(client, season, n=80, seed=3):
    rng = random.Random(seed)
    return [
        live.ingest(
            client,
            season,
            player_id=rng.randint(1, 30),
            points=rng.choice([1, 10, 20]),
            at=season.starts_at + timedelta(days=rng.randint(0, 1), seconds=rng.randint(0, 86399)),
        )
        for _ in range(n)
    ]


@pytest.mark.parametrize("rule", [ScoringRule.BEST, ScoringRule.CUMULATIVE])
def test_a_board_in_sync_is_left_alone(board_redis, rule):
    season = make_season(rule=rule)
    results = _populate(board_redis, season)
    result = board_reconcile(board_id=main_board_id(season.id), sample_size=50)
    assert (result.drift_found, result.rebuilt) == (False, False)
    run = ReconcileRun.objects.get(pk=int(result.run_id or 0))
    assert run.redis_members == run.expected_members == len(expected_board(season, results))
    assert run.mismatched_scores == 0


@pytest.mark.parametrize("rule", [ScoringRule.BEST, ScoringRule.CUMULATIVE])
def test_a_lost_redis_is_detected_and_repaired_exactly(own_redis, rule):
    season = make_season(rule=rule, status=SeasonStatus.ACTIVE)
    results = _populate(own_redis, season)
    season_key = keys.board(board_id=main_board_id(season.id))
    day = season.starts_at.date()
    day_key = keys.daily_board(board_id=main_board_id(season.id), day=day)
    assert live.board(own_redis, season_key) == expected_board(season, results)

    _lose_everything(own_redis)

    now = datetime.combine(day, datetime.min.time(), tzinfo=UTC) + timedelta(hours=20)
    # A board Redis lost as a whole (its intact key with it) is the recovery's, not the
    # reconcile's: the reconcile leaves it alone, the recovery rebuilds every part of it.
    assert boards_reconcile_live_seasons(now=now, sample_size=20) == []
    report = boards_recover(now=now)
    days = tuple(sorted({r.achieved_at.astimezone(UTC).date() for r in results}))
    assert [(r.board_id, r.days) for r in report.recovered] == [(main_board_id(season.id), days)]
    assert live.board(own_redis, season_key) == expected_board(season, results)
    assert live.board(own_redis, day_key) == expected_board(season, results, day=day)
    # Repaired: the next look finds nothing to do.
    outcomes = boards_reconcile_live_seasons(now=now, sample_size=20)
    assert [(o.day, o.drift_found) for o in outcomes] == [(None, False)] + [
        (d, False) for d in days
    ]
    assert not board_reconcile(board_id=main_board_id(season.id)).drift_found


def test_a_wrong_score_and_a_stray_member_are_drift(board_redis):
    season = make_season(rule=ScoringRule.CUMULATIVE)
    results = _populate(board_redis, season, n=40)
    key = keys.board(board_id=main_board_id(season.id))
    board_redis.zincrby(key, 1, "7")
    result = board_reconcile(board_id=main_board_id(season.id), sample_size=100)
    assert (result.drift_found, result.rebuilt) == (True, True)
    run = ReconcileRun.objects.get(pk=int(result.run_id or 0))
    assert run.mismatched_scores == 1
    assert run.mismatch_examples[0]["player_id"] == 7
    assert live.board(board_redis, key) == expected_board(season, results)

    # A voided result still on the board: the player is sampled from Redis.
    stray_player = max(expected_board(season, results))
    MatchResult.objects.filter(player_id=stray_player, season=season).update(
        voided_at=timezone.now()
    )
    stray = board_reconcile(board_id=main_board_id(season.id), sample_size=100, repair=False)
    assert (stray.drift_found, stray.rebuilt) == (True, False)


def test_reconcile_skips_a_board_being_rebuilt(board_redis):
    season = make_season()
    key = keys.board(board_id=main_board_id(season.id))
    board_redis.set(keys.rebuild_marker(board_key=key), "pending")
    result = board_reconcile(board_id=main_board_id(season.id))
    assert result.run_id is None
    assert not ReconcileRun.objects.exists()


def test_reconcile_days_cover_this_week_within_the_season():
    season = make_season()
    start = season.starts_at.date()  # a Thursday
    assert start.weekday() == 3
    assert reconcile_days(season=season, today=start + timedelta(days=1)) == [
        start,
        start + timedelta(days=1),
    ]
    monday = start + timedelta(days=4)
    assert reconcile_days(season=season, today=monday + timedelta(days=1)) == [
        monday,
        monday + timedelta(days=1),
    ]
