from __future__ import annotations

import random
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import connection

from closeout.models import FinalStanding, GrantStatus, HistoryEntry, RewardGrant
from closeout.services import (
    reward_tier_create,
    season_close,
    season_history_archive,
    season_standings_correct,
    season_standings_review,
    seasons_history_due,
)
from leaderboard import keys
from leaderboard.models import MatchResult, PlayerBan, RebuildRun, RunStatus, ScoringRule
from leaderboard.services import (
    SeasonClosedError,
    board_all_rebuild,
    board_rebuild,
    board_reconcile,
    boards_correct,
    match_result_void,
    player_ban,
    player_unban,
    weekly_board_build,
)
from leaderboard_project.celery import app as celery_app
from seasons.models import SeasonStatus
from seasons.selectors import SeasonRef
from tests.helpers import (
    as_board,
    board_read,
    expected_board,
    main_board_id,
    make_live_season,
    make_season,
)
from tests.leaderboard import live

pytestmark = pytest.mark.django_db(transaction=True)

RULES = [ScoringRule.BEST, ScoringRule.CUMULATIVE]


def _ingest(client, season, n=60, seed=11):
    rng = random.Random(seed)
    return [
        live.ingest(
            client,
            season,
            player_id=rng.randint(1, 12),
            points=rng.choice([3, 10, 40]),
            at=season.starts_at + timedelta(days=rng.randint(0, 5), seconds=rng.randint(0, 86399)),
        )
        for _ in range(n)
    ]


def _week_expected(season, results, iso, banned=()):
    in_week = [r for r in results if r.achieved_at.astimezone(UTC).isocalendar()[:2] == iso]
    return expected_board(season, in_week, banned=banned)


def _reload(results):
    return list(MatchResult.objects.filter(pk__in=[r.pk for r in results]))


def _assert_boards(client, season, results, days, banned=()):
    assert board_read(client, keys.board(board_id=main_board_id(season.id))) == expected_board(
        season, results, banned=banned
    )
    for day in days:
        assert board_read(
            client, keys.daily_board(board_id=main_board_id(season.id), day=day)
        ) == expected_board(season, results, day=day, banned=banned)


@pytest.mark.parametrize("rule", RULES)
def test_a_void_is_followed_by_the_right_rebuilt_boards(board_redis, rule):
    season = make_season(rule=rule, status=SeasonStatus.ACTIVE)
    results = _ingest(board_redis, season)
    board = expected_board(season, results)
    # A result that counts: it alone gives its player's score (best) or adds points (cumulative).
    victim = next(
        r
        for r in results
        if (r.points > 0 and expected_board(season, [r])[r.player_id] == board[r.player_id])
        or (rule == ScoringRule.CUMULATIVE and r.points > 0)
    )
    day = victim.achieved_at.astimezone(UTC).date()
    iso = tuple(day.isocalendar())[:2]
    ref = SeasonRef.from_model(season)
    weekly = keys.weekly_board(board_id=main_board_id(season.id), iso_year=iso[0], iso_week=iso[1])
    weekly_board_build(board=as_board(ref), iso_year=iso[0], iso_week=iso[1])
    assert board_read(board_redis, weekly) == _week_expected(season, results, iso)

    before = board_read(board_redis, keys.board(board_id=main_board_id(season.id)))
    correction = match_result_void(result_id=victim.pk, reason="desync")
    assert (correction.season_id, correction.days, correction.changed) == (season.id, (day,), True)
    assert not match_result_void(result_id=victim.pk, reason="again").changed
    outcome = boards_correct(season_id=season.id, days=correction.days)
    assert weekly in outcome.rebuilt

    results = _reload(results)
    assert MatchResult.objects.get(pk=victim.pk).void_reason == "desync"
    _assert_boards(board_redis, season, results, [day])
    assert board_read(board_redis, weekly) == _week_expected(season, results, iso)
    # Not vacuous: the void changed the player's score.
    after = board_read(board_redis, keys.board(board_id=main_board_id(season.id)))
    assert after.get(victim.player_id) != before.get(victim.player_id)


def test_a_week_built_on_demand_from_the_days_before_a_correction_is_rebuilt(board_redis):
    """A request builds a missing week on demand while a correction runs: it copied the daily
    boards before the correction rebuilt them, and publishes after the correction looked for
    the week (missing then). The correction waits for the build and rebuilds what it
    published."""
    season = make_season(status=SeasonStatus.ACTIVE)
    results = _ingest(board_redis, season)

    def week_of(result):
        return tuple(result.achieved_at.astimezone(UTC).isocalendar())[:2]

    # A result whose void changes its week's board.
    victim = next(
        r
        for r in results
        if _week_expected(season, [o for o in results if o.pk != r.pk], week_of(r))
        != _week_expected(season, results, week_of(r))
    )
    day = victim.achieved_at.astimezone(UTC).date()
    iso = week_of(victim)
    board = as_board(SeasonRef.from_model(season))
    weekly = keys.weekly_board(board_id=board.id, iso_year=iso[0], iso_week=iso[1])
    # The request's build, from the days as they were, not published yet.
    weekly_board_build(board=board, iso_year=iso[0], iso_week=iso[1])
    stale = board_read(board_redis, weekly)
    assert victim.player_id in stale
    in_flight = f"{weekly}:test-in-flight"
    board_redis.rename(weekly, in_flight)
    lock = keys.weekly_build_lock(board_key=weekly)
    board_redis.set(lock, "1", ex=60)

    correction = match_result_void(result_id=victim.pk, reason="desync")
    outcome: list[object] = []

    def correct() -> None:
        try:
            outcome.append(boards_correct(season_id=season.id, days=correction.days))
        finally:
            connection.close()

    worker = threading.Thread(target=correct)
    worker.start()
    try:
        deadline = time.monotonic() + 30
        while not RebuildRun.objects.filter(
            board_id=board.id, day=day, status=RunStatus.SUCCEEDED
        ).exists():
            assert time.monotonic() < deadline, "the correction never rebuilt the day"
            time.sleep(0.02)
        # The request publishes its build and lets the lock go.
        board_redis.rename(in_flight, weekly)
        board_redis.delete(lock)
    finally:
        worker.join(timeout=90)
    (done,) = outcome
    assert weekly in done.rebuilt  # type: ignore[attr-defined]
    assert board_read(board_redis, weekly) == _week_expected(season, _reload(results), iso)
    assert board_read(board_redis, weekly) != stale


@pytest.mark.parametrize("rule", RULES)
def test_a_ban_is_followed_by_the_right_rebuilt_boards(board_redis, rule):
    season = make_season(rule=rule, status=SeasonStatus.ACTIVE)
    results = _ingest(board_redis, season)
    cheater = 5
    days = sorted({r.achieved_at.astimezone(UTC).date() for r in results if r.player_id == cheater})
    assert days
    correction = player_ban(season_id=season.id, player_id=cheater, reason="aimbot")
    assert correction.days == tuple(days)
    boards_correct(season_id=season.id, days=correction.days)
    all_days = sorted({r.achieved_at.astimezone(UTC).date() for r in results})
    _assert_boards(board_redis, season, results, all_days, banned=[cheater])
    assert board_redis.zscore(keys.board(board_id=main_board_id(season.id)), str(cheater)) is None
    with pytest.raises(ValidationError):
        player_ban(season_id=season.id, player_id=6, reason="  ")


def test_a_closed_season_lists_corrected_standings_and_grants_for_review(
    board_redis, settings, drained_match_results
):
    settings.FINAL_STANDINGS_SIZE = 3
    season = make_season(status=SeasonStatus.ACTIVE)
    for player, points in [(1, 50), (2, 40), (3, 30), (4, 20)]:
        live.ingest(board_redis, season, player_id=player, points=points, at=season.starts_at)
    reward_tier_create(season_id=season.id, rank_from=1, rank_to=1, reward_name="crown")
    reward_tier_create(season_id=season.id, rank_from=2, rank_to=3, reward_name="gems")
    assert season_close(season_id=season.id, grace_seconds=0).standings == 3
    season_history_archive(season_id=season.id)
    assert HistoryEntry.objects.get(season=season, player_id=1).rank == 1
    RewardGrant.objects.filter(player_id=2).update(status=GrantStatus.DELIVERED)

    correction = player_ban(season_id=season.id, player_id=1, reason="cheat")
    outcome = boards_correct(season_id=season.id, days=correction.days)
    assert outcome.needs_standings_review
    assert outcome.rebuilt == ()
    assert not board_redis.exists(keys.board(board_id=main_board_id(season.id)))  # stays unlinked

    review = season_standings_review(season_id=season.id)
    assert [(c.player_id, c.old_rank, c.new_rank) for c in review.standings] == [
        (2, 2, 1),
        (3, 3, 2),
        (4, None, 3),
        (1, 1, None),
    ]
    assert [(g.player_id, g.action) for g in review.grants] == [
        (1, "revoke"),
        (2, "change"),
        (3, "change"),
        (4, "grant"),
    ]
    # Nothing changes until staff apply exactly what they reviewed.
    assert FinalStanding.objects.filter(season=season, player_id=1).exists()
    with pytest.raises(ValidationError, match="review them again"):
        season_standings_correct(season_id=season.id, fingerprint="stale")
    season_standings_correct(season_id=season.id, fingerprint=review.fingerprint)

    assert list(
        FinalStanding.objects.filter(season=season).values_list("rank", "player_id", "points")
    ) == [(1, 2, 40), (2, 3, 30), (3, 4, 20)]
    grants = {
        g.player_id: (g.rank, g.reward_name, g.status)
        for g in RewardGrant.objects.filter(season=season)
    }
    assert grants == {
        1: (1, "crown", GrantStatus.REVOKED),
        2: (1, "crown", GrantStatus.DELIVERED),
        3: (2, "gems", GrantStatus.PENDING),
        4: (3, "gems", GrantStatus.PENDING),
    }
    assert not season_standings_review(season_id=season.id).has_changes
    # Every player's history of the season is ranked again, from the corrected results: the
    # sweep archives it anew (here at once).
    assert HistoryEntry.objects.filter(season=season).count() == 0
    assert seasons_history_due() == [season.id]
    season_history_archive(season_id=season.id)
    assert list(
        HistoryEntry.objects.filter(season=season)
        .order_by("rank")
        .values_list("player_id", "rank", "total")
    ) == [(2, 1, 3), (3, 2, 3), (4, 3, 3)]


@pytest.fixture
def eager_celery():
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = False


def test_admin_void_asks_a_reason_then_voids_and_rebuilds(board_redis, staff, eager_celery):
    season = make_season(status=SeasonStatus.ACTIVE)
    results = _ingest(board_redis, season, n=20)
    victim = results[0]
    url = "/admin/leaderboard/matchresult/"
    form = {"action": "void_match_results", "_selected_action": [victim.pk]}
    page = staff.post(url, form)
    assert page.status_code == 200
    assert b"Reason (required)" in page.content
    done = staff.post(url, {**form, "confirmed": "yes", "reason": "server bug"}, follow=True)
    assert b"1 result(s) voided." in done.content
    assert MatchResult.objects.get(pk=victim.pk).voided_at is not None
    _assert_boards(board_redis, season, _reload(results), [])


@pytest.mark.parametrize(
    ("reason", "refusal"),
    [("  ", b"A void needs a reason."), ("bug\x00", b"A void reason cannot contain a NUL")],
)
def test_admin_void_refuses_a_blank_or_unstorable_reason_and_asks_again(
    board_redis, staff, eager_celery, reason, refusal
):
    season = make_season(status=SeasonStatus.ACTIVE)
    (victim,) = _ingest(board_redis, season, n=1)
    url = "/admin/leaderboard/matchresult/"
    form = {"action": "void_match_results", "_selected_action": [victim.pk]}
    page = staff.post(url, {**form, "confirmed": "yes", "reason": reason})
    assert page.status_code == 200
    assert b"Reason (required)" in page.content
    assert refusal in page.content
    assert MatchResult.objects.get(pk=victim.pk).voided_at is None
    with pytest.raises(ValidationError):
        match_result_void(result_id=victim.pk, reason=reason)


def test_admin_ban_rebuilds_and_records_the_staff_user(board_redis, staff, eager_celery):
    season = make_season(status=SeasonStatus.ACTIVE)
    results = _ingest(board_redis, season, n=20)
    response = staff.post(
        "/admin/leaderboard/playerban/add/",
        {"season": season.id, "player_id": 3, "reason": "smurf"},
        follow=True,
    )
    assert response.status_code == 200
    ban = PlayerBan.objects.get()
    assert (ban.player_id, ban.created_by.username if ban.created_by else None) == (3, "staff")
    _assert_boards(board_redis, season, results, [], banned=[3])


def test_admin_review_page_renders_and_applies(board_redis, staff, settings, drained_match_results):
    settings.FINAL_STANDINGS_SIZE = 2
    season = make_season(status=SeasonStatus.ACTIVE)
    for player, points in [(1, 50), (2, 40), (3, 30)]:
        live.ingest(board_redis, season, player_id=player, points=points, at=season.starts_at)
    season_close(season_id=season.id, grace_seconds=0)
    PlayerBan.objects.create(season=season, player_id=1, reason="x")
    url = "/admin/seasons/season/"
    page = staff.post(url, {"action": "review_final_standings", "_selected_action": [season.id]})
    assert page.status_code == 200
    assert b"Apply these changes" in page.content
    fingerprint = season_standings_review(season_id=season.id).fingerprint
    staff.post(
        url,
        {
            "action": "review_final_standings",
            "_selected_action": [season.id],
            "fingerprint": fingerprint,
        },
    )
    assert list(
        FinalStanding.objects.filter(season=season).values_list("player_id", flat=True)
    ) == [2, 3]


def test_admin_corrections_refuse_non_staff(client):
    user = get_user_model().objects.create_user("player", "p@example.com", "pw")
    client.force_login(user)
    for url in ("/admin/leaderboard/playerban/add/", "/admin/leaderboard/matchresult/"):
        response = client.get(url)
        assert response.status_code == 302
        assert "/admin/login/" in response["Location"]


def test_a_week_that_cannot_be_built_never_stops_a_correction(board_redis):
    """Cumulative: two days' sums each fit the codec, the week's does not. The weekly merge
    refuses; the correction (a ban of someone else) goes on with every other board."""
    season = make_season(rule=ScoringRule.CUMULATIVE, status=SeasonStatus.ACTIVE)
    board = as_board(season)
    half = board.codec.max_points // 2 + 1
    first = season.starts_at.date() + timedelta(days=1)
    while first.isoweekday() > 5:
        first += timedelta(days=1)
    noon = season.starts_at.replace(
        year=first.year, month=first.month, day=first.day, hour=12, minute=0, second=0
    )
    results = [
        live.ingest(board_redis, season, player_id=1, points=half, at=noon),
        live.ingest(board_redis, season, player_id=1, points=half, at=noon + timedelta(days=1)),
        live.ingest(board_redis, season, player_id=2, points=5, at=noon),
        live.ingest(board_redis, season, player_id=3, points=7, at=noon),
    ]
    iso_year, iso_week, _ = first.isocalendar()
    weekly = keys.weekly_board(board_id=board.id, iso_year=iso_year, iso_week=iso_week)
    board_redis.zadd(weekly, {"2": 1.0})  # a weekly board from before, in Redis
    correction = player_ban(season_id=season.id, player_id=3, reason="smurf")
    corrected = boards_correct(season_id=season.id, days=correction.days)
    assert weekly not in corrected.rebuilt
    assert board_read(board_redis, keys.daily_board(board_id=board.id, day=first)) == (
        expected_board(season, results, day=first, banned=[3])
    )


def _week_with_its_monday_expired(redis_client):
    """Players 1 (Monday), 2 (Thursday) and 3 (Friday) on a week of two months ago, its weekly
    board built while every day was there, then Monday's daily board expired (unlinked: what
    its expiry does LEADERBOARD_DAILY_TTL_DAYS after the day)."""
    season = make_live_season(days=60)
    board = as_board(season)
    monday = season.starts_at.date() + timedelta(days=7 - season.starts_at.date().weekday())
    noon = datetime.combine(monday, datetime.min.time(), tzinfo=UTC) + timedelta(hours=12)
    for player, days_on in ((1, 0), (2, 3), (3, 4)):
        live.ingest(
            redis_client,
            season,
            player_id=player,
            points=10 * player,
            at=noon + timedelta(days=days_on),
        )
    iso_year, iso_week, _ = monday.isocalendar()
    weekly_board_build(board=board, iso_year=iso_year, iso_week=iso_week)
    weekly = keys.weekly_board(board_id=board.id, iso_year=iso_year, iso_week=iso_week)
    assert set(board_read(redis_client, weekly)) == {1, 2, 3}
    redis_client.unlink(keys.daily_board(board_id=board.id, day=monday))
    return season, board, weekly


def test_a_ban_takes_the_player_off_a_week_whose_first_days_expired_and_keeps_the_rest(
    board_redis,
):
    season, _board, weekly = _week_with_its_monday_expired(board_redis)
    correction = player_ban(season_id=season.id, player_id=2, reason="cheat")
    outcome = boards_correct(
        season_id=season.id, days=correction.days, subjects=correction.subjects
    )
    # Rebuilt from Thursday and Friday alone, the week would have lost player 1: it is left as
    # built, with the banned player taken off.
    assert weekly not in outcome.rebuilt
    assert set(board_read(board_redis, weekly)) == {1, 3}


def test_a_rebuild_keeps_a_week_whose_first_days_expired_unless_it_brings_them_back(
    board_redis,
):
    _season, board, weekly = _week_with_its_monday_expired(board_redis)
    rebuilt = board_all_rebuild(board_id=board.id)
    assert rebuilt.weekly_boards == ()
    assert set(board_read(board_redis, weekly)) == {1, 2, 3}
    # Every day with a result back from PostgreSQL: the week is whole again, and rebuilt.
    rebuilt = board_all_rebuild(board_id=board.id, all_days=True)
    assert rebuilt.weekly_boards == (weekly,)
    assert set(board_read(board_redis, weekly)) == {1, 2, 3}


def test_an_unban_brings_back_the_daily_board_its_ban_emptied(board_redis):
    """The correction rebuilt only the daily boards in Redis: a day whose only player was
    banned had none, so their unban left them off that day's board (and its week's)."""
    season = make_season(status=SeasonStatus.ACTIVE)
    at = season.starts_at + timedelta(days=1)
    live.ingest(board_redis, season, player_id=7, points=30, at=at)
    daily = keys.daily_board(board_id=main_board_id(season.id), day=at.astimezone(UTC).date())
    assert set(board_read(board_redis, daily)) == {7}
    ban = player_ban(season_id=season.id, player_id=7, reason="cheat")
    boards_correct(season_id=season.id, days=ban.days)
    assert not board_redis.exists(daily)
    lifted = player_unban(season_id=season.id, player_id=7)
    outcome = boards_correct(season_id=season.id, days=lifted.days)
    assert daily in outcome.rebuilt
    assert set(board_read(board_redis, daily)) == {7}


def test_a_closed_season_is_never_rebuilt_into_redis_again(
    board_redis, drained_match_results, capsys
):
    """A rebuild or reconcile of a closed season (staff, or the hourly reconcile meeting a
    close-out) put its board back in Redis with no expiry, after the close-out dropped it."""
    from django.core.management import CommandError, call_command

    season = make_season(status=SeasonStatus.ACTIVE)
    live.ingest(board_redis, season, player_id=1, points=10, at=season.starts_at)
    assert season_close(season_id=season.id, grace_seconds=0).closed
    board = main_board_id(season.id)
    with pytest.raises(SeasonClosedError):
        board_rebuild(board_id=board, reason="staff")
    with pytest.raises(SeasonClosedError):
        board_reconcile(board_id=board)
    with pytest.raises(CommandError, match="closed"):
        call_command("rebuild_leaderboard", "--season", str(season.id))
    assert list(board_redis.scan_iter(match=keys.board_pattern(board_id=board))) == []
