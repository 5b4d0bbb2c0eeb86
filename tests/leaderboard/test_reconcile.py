from __future__ import annotations

import random
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import redis
from django.conf import settings as django_settings
from django.db.models import F
from django.utils import timezone

from leaderboard import keys
from leaderboard.models import MatchResult, ReconcileRun, ScoringRule
from leaderboard.redis import get_board_redis
from leaderboard.services import (
    board_days_in_window,
    board_reconcile,
    boards_reconcile_live_seasons,
    boards_recover,
    reconcile_days,
    weekly_board_build,
)
from leaderboard.services.derived import weekly_days_kept
from seasons.models import SeasonStatus
from tests.helpers import (
    as_board,
    board_read,
    expected_board,
    main_board_id,
    make_live_season,
    make_season,
    mark_intact,
    redis_url,
)
from tests.leaderboard import live

pytestmark = pytest.mark.django_db(transaction=True)

# A Redis database this suite alone uses (on the configured server), so "Redis lost everything"
# can be a real FLUSHDB without touching anyone else's keys (db 0/1/2 are shared and are never
# flushed).
OWN_DB = 9


@pytest.fixture
def own_redis(settings):
    if settings.LB_REDIS_MODE == "cluster":
        # A cluster has one database, shared by every test: this test's keys (its own prefix)
        # are all it can lose; the session's cleanup drops what is left.
        yield get_board_redis()
        return
    settings.CACHES = {
        **django_settings.CACHES,
        "boards": {**django_settings.CACHES["boards"], "LOCATION": redis_url(db=OWN_DB)},
    }
    client = get_board_redis()
    assert isinstance(client, redis.Redis)
    assert client.connection_pool.connection_kwargs["db"] == OWN_DB
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
    assert board_read(own_redis, season_key) == expected_board(season, results)

    _lose_everything(own_redis)

    now = datetime.combine(day, datetime.min.time(), tzinfo=UTC) + timedelta(hours=20)
    # A board Redis lost as a whole (its intact key with it) is the recovery's, not the
    # reconcile's: the reconcile leaves it alone, the recovery rebuilds every part of it.
    assert boards_reconcile_live_seasons(now=now, sample_size=20) == []
    report = boards_recover(now=now)
    days = tuple(sorted({r.achieved_at.astimezone(UTC).date() for r in results}))
    assert [(r.board_id, r.days) for r in report.recovered] == [(main_board_id(season.id), days)]
    assert board_read(own_redis, season_key) == expected_board(season, results)
    assert board_read(own_redis, day_key) == expected_board(season, results, day=day)
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
    assert board_read(board_redis, key) == expected_board(season, results)

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


def test_an_old_day_with_a_late_result_is_in_the_window_its_board_expires_after():
    """Ingestion keeps a daily board DAILY_TTL days after its last write: a day of two months
    ago that got a result yesterday is in Redis, so the checks after a Redis loss cover it."""
    from leaderboard.selectors.boards import board_get

    now = timezone.now()
    season = make_season(
        status=SeasonStatus.ACTIVE, starts_at=now - timedelta(days=90), ends_at=now
    )
    board_id = main_board_id(season.id)
    old_day, late_day = (now - timedelta(days=61)).date(), (now - timedelta(days=60)).date()
    for day, ingested_at in (
        (old_day, now - timedelta(days=61)),
        (late_day, now - timedelta(days=1)),
    ):
        MatchResult.objects.create(
            season_id=season.id,
            board_id=board_id,
            match_id=uuid.uuid4(),
            player_id=1,
            points=5,
            achieved_at=datetime(day.year, day.month, day.day, 12, tzinfo=UTC),
            ingested_at=ingested_at,
        )
    board = board_get(board_id=board_id)
    assert board_days_in_window(board=board, now=now) == [late_day]
    later = now + timedelta(days=django_settings.LEADERBOARD_DAILY_TTL_DAYS + 1)
    assert board_days_in_window(board=board, now=later) == []


def _lose_last_writes(client, season, *, players: list[int], now) -> list[MatchResult]:
    """Ingest one result for each of ``players``, then put their scores back as they were
    (season-long and daily): what a Redis restart that lost its last second leaves."""
    board_id = main_board_id(season.id)
    at = now - timedelta(hours=1)
    touched = [keys.board(board_id=board_id), keys.daily_board(board_id=board_id, day=at.date())]
    before = {key: board_read(client, key) for key in touched}
    results = [live.ingest(client, season, player_id=p, points=3, at=at) for p in players]
    for key in touched:
        for player in players:
            if player in before[key]:
                client.zadd(key, {str(player): before[key][player]})
            else:
                client.zrem(key, str(player))
    return results


def _large_board_with_lost_last_writes(client, now, *, players: int = 60):
    """``players`` ingested two hours ago, then 5 whose last writes Redis lost just now."""
    season = make_live_season(days=5, rule=ScoringRule.CUMULATIVE)
    rng = random.Random(11)
    old = [
        live.ingest(
            client, season, player_id=p, points=rng.randint(1, 9), at=now - timedelta(days=1)
        )
        for p in range(1, players + 1)
    ]
    MatchResult.objects.filter(season=season).update(ingested_at=now - timedelta(hours=2))
    lost = _lose_last_writes(client, season, players=[3, 17, 29, 44, 58], now=now)
    return season, old + lost


def test_a_large_board_after_a_restart_compares_every_recently_ingested_player(
    board_redis, settings
):
    """A board too large to compare in full is compared by sample; after a Redis restart, the
    players ingested shortly before it are compared too: a sample of two would find the five
    lost writes only by luck."""
    now = timezone.now()
    season, results = _large_board_with_lost_last_writes(board_redis, now)
    board_id = main_board_id(season.id)

    result = board_reconcile(
        board_id=board_id,
        sample_size=2,
        full_max_members=10,
        recent_since=now - timedelta(minutes=1),
    )

    assert (result.full, result.drift_found, result.rebuilt) == (False, True, True)
    run = ReconcileRun.objects.get(pk=int(result.run_id or 0))
    assert run.mismatched_scores == 5
    assert board_read(board_redis, keys.board(board_id=board_id)) == expected_board(season, results)


def test_the_recovery_compares_the_players_ingested_before_a_redis_restart(own_redis, settings):
    """The recovery task keeps a heartbeat with the run id it saw; after a new run id it
    compares every board with PostgreSQL, on large boards every player ingested since shortly
    before that heartbeat."""
    settings.RECONCILE_FULL_MAX_MEMBERS = 10
    now = timezone.now()
    # Five times the default sample (200): it alone would find all five lost writes only by
    # a luck of about 1 in 300,000.
    season, results = _large_board_with_lost_last_writes(own_redis, now, players=1000)
    board_id = main_board_id(season.id)
    # The run id of the Redis before the restart, seen by the recovery 5 s ago.
    own_redis.set(keys.redis_run_id_seen(), f"0123abcd {now.timestamp() - 5:.3f}")
    # ... and, as after any restart, no board is checked on the new Redis process.
    own_redis.delete(keys.board_checked(board_id=board_id))

    report = boards_recover()

    assert report.redis_restarted
    # Nothing was lost as a whole, but the board differs: it is recovered in full (watermark
    # raised with every key rebuilt), since its lost writes took the watermark's moves along.
    assert [(r.board_id, r.reason) for r in report.recovered] == [
        (board_id, "Redis restarted or failed over: board differs from PostgreSQL")
    ]
    season_long = [r for r in report.reconciled if r.day is None]
    assert [(r.board_id, r.full, r.drift_found, r.rebuilt) for r in season_long] == [
        (board_id, False, True, True)
    ]
    assert ReconcileRun.objects.get(pk=int(season_long[0].run_id or 0)).mismatched_scores == 5
    assert board_read(own_redis, keys.board(board_id=board_id)) == expected_board(season, results)
    day = (now - timedelta(hours=1)).astimezone(UTC).date()
    assert board_read(own_redis, keys.daily_board(board_id=board_id, day=day)) == (
        expected_board(season, results, day=day)
    )
    # The heartbeat now holds this Redis's run id: the next look reconciles nothing.
    assert not own_redis.get(keys.redis_run_id_seen()).startswith(b"0123abcd ")
    assert boards_recover().reconciled == ()


def _same_week_days(season) -> tuple[datetime, datetime]:
    """Two consecutive days of one ISO week within the season, as noon times."""
    first = season.starts_at.date() + timedelta(days=1)
    while first.isoweekday() > 5:
        first += timedelta(days=1)
    noon = datetime.combine(first, datetime.min.time(), tzinfo=UTC) + timedelta(hours=12)
    return noon, noon + timedelta(days=1)


def test_a_weekly_board_that_cannot_be_built_never_stops_the_recovery(own_redis):
    # Cumulative: each day's sum fits the codec, the two days together do not. The season-long
    # board leaves the player off; the weekly merge refuses to build.
    season = make_live_season(rule=ScoringRule.CUMULATIVE)
    board = as_board(season)
    half = board.codec.max_points // 2 + 1
    one, two = _same_week_days(season)
    live.ingest(own_redis, season, player_id=1, points=half, at=one)
    live.ingest(own_redis, season, player_id=1, points=half, at=two)
    live.ingest(own_redis, season, player_id=2, points=5, at=one)
    _lose_everything(own_redis)

    report = boards_recover(now=two + timedelta(hours=6))
    (recovered,) = [r for r in report.recovered if r.board_id == board.id]
    assert recovered.weeks == ()  # the week is left off, logged
    assert own_redis.exists(keys.board_intact(board_id=board.id)) == 1
    assert own_redis.zcard(keys.board(board_id=board.id)) == 1  # player 2; player 1 left off


def test_the_recovery_keeps_a_weekly_board_whose_first_days_expired(own_redis):
    season = make_live_season(days=60)
    board = as_board(season)
    monday = season.starts_at.date() + timedelta(days=7 - season.starts_at.date().weekday())
    noon = datetime.combine(monday, datetime.min.time(), tzinfo=UTC) + timedelta(hours=12)
    live.ingest(own_redis, season, player_id=1, points=100, at=noon)
    live.ingest(own_redis, season, player_id=2, points=50, at=noon + timedelta(days=3))
    # Ingested as they were played (no late write keeping an old day's board longer).
    MatchResult.objects.filter(season=season).update(ingested_at=F("achieved_at"))
    iso_year, iso_week, _ = monday.isocalendar()
    weekly_board_build(board=board, iso_year=iso_year, iso_week=iso_week)
    weekly = keys.weekly_board(board_id=board.id, iso_year=iso_year, iso_week=iso_week)
    assert own_redis.zcard(weekly) == 2
    # 16.5 days on: Monday's daily board has expired, Thursday's is still kept. The board is
    # then lost (its intact key gone): the recovery rebuilds it.
    own_redis.unlink(keys.daily_board(board_id=board.id, day=monday))
    own_redis.unlink(keys.board_intact(board_id=board.id))
    now = noon + timedelta(days=16, hours=12)
    report = boards_recover(now=now)
    assert board.id in [r.board_id for r in report.recovered]
    # Built again from Thursday alone it would have lost player 1: it is kept as it was.
    assert own_redis.zcard(weekly) == 2
    assert weekly_days_kept(board=board, iso_year=iso_year, iso_week=iso_week, now=now) is False


def test_a_checked_key_copied_from_another_redis_process_vouches_for_nothing(
    own_redis, client, settings
):
    """An AOF rewrite, a snapshot or a replica's full resync copies memory, checked keys
    included: a server restarted from them came back with every board 'checked' and served the
    boards as truth though it may have lost its last second of writes. A checked key holds the
    run id of the process that wrote it, and vouches on that process only."""
    settings.RECONCILE_FULL_MAX_MEMBERS = 10
    now = timezone.now()
    season, results = _large_board_with_lost_last_writes(own_redis, now, players=100)
    board_id = main_board_id(season.id)
    checked = keys.board_checked(board_id=board_id)
    url = f"/api/seasons/{season.id}/leaderboard/top?limit=5"
    assert client.get(url).status_code == 200  # checked on this process (the fixture's mark)
    assert own_redis.get(checked).startswith(b"run:")
    # The previous process's key, as a restart from a rewritten AOF brings it back.
    own_redis.set(checked, b"run:0123456789abcdef0123456789abcdef01234567")
    assert client.get(url).status_code == 503
    # The recovery's look takes it for missing: it compares the board and recovers it.
    report = boards_recover()
    assert board_id in [r.board_id for r in report.recovered]
    assert board_read(own_redis, keys.board(board_id=board_id)) == expected_board(season, results)
    assert client.get(url).status_code == 200


@pytest.mark.parametrize("restarted", [False, True])
def test_a_checked_key_of_the_older_form_is_stamped_unless_redis_restarted(
    own_redis, client, restarted
):
    season = make_live_season()
    _populate(own_redis, season, n=20)
    board_id = main_board_id(season.id)
    mark_intact(season)
    boards_recover()  # the heartbeat holds this Redis's run id now
    checked = keys.board_checked(board_id=board_id)
    own_redis.set(checked, "1")  # as written before checked keys carried a run id
    if restarted:
        own_redis.set(keys.redis_run_id_seen(), f"0123abcd {time.time() - 5:.3f}")
    url = f"/api/seasons/{season.id}/leaderboard/top?limit=5"
    assert client.get(url).status_code == 200  # still vouching until the recovery looks
    report = boards_recover()
    # Compared again only when Redis restarted since the last look; stamped either way.
    assert bool(report.reconciled) == restarted
    assert own_redis.get(checked).startswith(b"run:")
    assert client.get(url).status_code == 200
