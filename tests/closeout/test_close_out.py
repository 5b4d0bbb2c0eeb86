from __future__ import annotations

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from closeout.models import FinalStanding, RewardGrant
from closeout.services import CloseOutcome, reward_tier_create, season_close
from closeout.services import close_out as close_out_module
from closeout.tasks import season_close_task, seasons_close_due_task
from leaderboard import keys
from seasons.models import Season, SeasonStatus
from seasons.selectors import seasons_keys_unreleased
from tests.factories import MatchResultFactory, SeasonFactory
from tests.helpers import as_board, main_board_id

START = datetime(2026, 10, 1, tzinfo=UTC)
END = START + timedelta(days=30)
AFTER = END + timedelta(hours=1)

# A close-out waits for the match-results topic to drain: give it an empty one.
pytestmark = pytest.mark.usefixtures("drained_match_results")


def at(seconds: float) -> datetime:
    return START + timedelta(seconds=seconds)


def standings(season_id: int) -> list[tuple[int, int, int, datetime]]:
    return [
        (s.rank, s.player_id, s.points, s.reached_at)
        for s in FinalStanding.objects.filter(season_id=season_id).order_by("rank")
    ]


def grants(season_id: int) -> list[tuple[int, int, str, int, str]]:
    return [
        (g.rank, g.player_id, g.reward_name, g.quantity, g.status)
        for g in RewardGrant.objects.filter(season_id=season_id).order_by("rank")
    ]


@pytest.fixture
def best_season(board_redis) -> Season:
    season = SeasonFactory.create(starts_at=START, ends_at=END, status=SeasonStatus.ACTIVE)
    results = [
        # player, points, achieved (seconds after the start)
        (1, 500, 100.0),
        (1, 900, 50.0),
        (1, 900, 10.0),  # the earliest time of player 1's best
        (2, 900, 20.0),  # same points, later: ranks after player 1
        (3, 700, 5.0),
        (4, 100, 1.0),
        (5, 700, 5.4),  # same points and same one-second tick as player 3: lower id first
        (6, 5000, 1.0),  # voided: does not count
        (6, 10, 2.0),
    ]
    for player, points, seconds in results:
        MatchResultFactory.create(
            season=season, player_id=player, points=points, achieved_at=at(seconds)
        )
    from leaderboard.models import MatchResult

    MatchResult.objects.filter(player_id=6, points=5000).update(voided_at=START)
    reward_tier_create(season_id=season.id, rank_from=1, rank_to=1, reward_name="crown")
    reward_tier_create(season_id=season.id, rank_from=2, rank_to=3, reward_name="gems", quantity=50)
    reward_tier_create(season_id=season.id, rank_from=5, rank_to=50, reward_name="badge")
    # The season's Redis keys (and another season's, which must survive).
    board_redis.zadd(keys.board(board_id=main_board_id(season.id)), {"1": 1.0})
    board_redis.zadd(
        keys.daily_board(board_id=main_board_id(season.id), day=START.date()), {"1": 1.0}
    )
    board_redis.set(keys.top_snapshot(board_id=main_board_id(season.id)), b"[]")
    board_redis.zadd(keys.board(board_id=main_board_id(season) + 1000), {"1": 1.0})
    return season


@pytest.mark.django_db
def test_close_out_twice_grants_once(best_season: Season, board_redis) -> None:
    season = best_season
    first = season_close(season_id=season.id, now=AFTER, grace_seconds=0)
    assert first.outcome == CloseOutcome.CLOSED
    assert (first.standings, first.grants_created, first.keys_unlinked) == (6, 5, 3)

    assert standings(season.id) == [
        (1, 1, 900, at(10)),
        (2, 2, 900, at(20)),
        (3, 3, 700, at(5)),
        (4, 5, 700, at(5)),
        (5, 4, 100, at(1)),
        (6, 6, 10, at(2)),
    ]
    assert grants(season.id) == [
        (1, 1, "crown", 1, "pending"),
        (2, 2, "gems", 50, "pending"),
        (3, 3, "gems", 50, "pending"),
        (5, 4, "badge", 1, "pending"),
        (6, 6, "badge", 1, "pending"),
    ]
    closed = Season.objects.get(id=season.id)
    assert (closed.status, closed.closed_at) == (SeasonStatus.CLOSED, AFTER)
    assert (
        list(board_redis.scan_iter(match=keys.board_pattern(board_id=main_board_id(season.id))))
        == []
    )
    assert board_redis.exists(keys.board(board_id=main_board_id(season) + 1000)) == 1

    # Staff delivered one grant; a second close-out changes nothing and grants nothing.
    RewardGrant.objects.filter(player_id=1).update(status="delivered")
    board_redis.zadd(keys.board(board_id=main_board_id(season.id)), {"9": 1.0})  # a straggler key
    second = season_close(season_id=season.id, now=AFTER + timedelta(hours=1), grace_seconds=0)
    assert (second.outcome, second.grants_created, second.keys_unlinked) == (
        CloseOutcome.ALREADY_CLOSED,
        0,
        1,
    )
    assert RewardGrant.objects.filter(season=season).count() == 5
    assert grants(season.id)[0][4] == "delivered"
    assert len(standings(season.id)) == 6
    assert Season.objects.get(id=season.id).closed_at == AFTER


@pytest.mark.django_db
def test_close_out_waits_for_the_drain_grace(best_season: Season) -> None:
    season = best_season
    asked = END - timedelta(minutes=5)  # staff close it early
    result = season_close(season_id=season.id, now=asked, grace_seconds=60)
    assert result.outcome == CloseOutcome.DRAINING
    assert result.drain_until == asked + timedelta(seconds=60)
    closing = Season.objects.get(id=season.id)
    assert (closing.status, closing.closing_since) == (SeasonStatus.CLOSING, asked)
    assert FinalStanding.objects.filter(season=season).count() == 0

    again = season_close(season_id=season.id, now=asked + timedelta(seconds=59), grace_seconds=60)
    assert again.outcome == CloseOutcome.DRAINING
    done = season_close(season_id=season.id, now=asked + timedelta(seconds=60), grace_seconds=60)
    assert (done.outcome, done.standings, done.grants_created) == (CloseOutcome.CLOSED, 6, 5)


@pytest.mark.django_db
def test_a_season_reopened_while_its_close_out_waits_stays_open_with_its_boards(
    best_season: Season, board_redis, monkeypatch
) -> None:
    season = best_season
    board = keys.board(board_id=main_board_id(season.id))
    asked = END - timedelta(minutes=5)  # staff close it early, then change their mind
    assert season_close(season_id=season.id, now=asked, grace_seconds=60).outcome == (
        CloseOutcome.DRAINING
    )
    Season.objects.filter(id=season.id).update(status=SeasonStatus.ACTIVE, closing_since=None)
    # The periodic task (queued while it was closing) leaves the reopened season as it is.
    later = asked + timedelta(seconds=61)
    swept = season_close(season_id=season.id, now=later, grace_seconds=60, start_closing=False)
    assert (swept.outcome, swept.status) == (CloseOutcome.REOPENED, SeasonStatus.ACTIVE)
    assert Season.objects.get(id=season.id).status == SeasonStatus.ACTIVE

    # Reopened during the drain itself (after the switch, before the standings): the
    # finalize finds it active, and its live boards are not taken for leftovers.
    import closeout.services.close_out as close_out

    def reopen_while_draining(**kwargs: object) -> str:
        Season.objects.filter(id=season.id).update(status=SeasonStatus.ACTIVE, closing_since=None)
        return ""

    monkeypatch.setattr(close_out, "_season_drain_wait", reopen_while_draining)
    result = season_close(season_id=season.id, now=later, grace_seconds=0)
    assert result.outcome == CloseOutcome.REOPENED
    assert Season.objects.get(id=season.id).status == SeasonStatus.ACTIVE
    assert board_redis.exists(board) == 1
    assert FinalStanding.objects.filter(season=season).count() == 0
    assert RewardGrant.objects.filter(season=season).count() == 0


@pytest.mark.django_db
def test_close_out_of_a_cumulative_season(settings) -> None:
    settings.FINAL_STANDINGS_SIZE = 2
    season = SeasonFactory.create(starts_at=START, ends_at=END, rule="cumulative")
    for player, points, seconds in [(1, 10, 30), (1, 15, 3), (2, 20, 5), (2, 5, 40), (3, 1, 1)]:
        MatchResultFactory.create(
            season=season, player_id=player, points=points, achieved_at=at(seconds)
        )
    reward_tier_create(season_id=season.id, rank_from=1, rank_to=2, reward_name="gems")
    result = season_close(season_id=season.id, now=AFTER, grace_seconds=0)
    # Both have 25 points; player 1's last result is earlier (30 s against 40 s).
    assert standings(season.id) == [(1, 1, 25, at(30)), (2, 2, 25, at(40))]
    assert (result.standings, result.grants_created) == (2, 2)


@pytest.mark.django_db
def test_a_cumulative_sum_past_the_codec_is_off_the_standings_and_the_season_closes() -> None:
    # As on the board in Redis and in the history: the close-out failed on it, every sweep,
    # and the season stayed closing for good.
    season = SeasonFactory.create(starts_at=START, ends_at=END, rule="cumulative")
    top = as_board(season).codec.max_points
    for player, points in [(1, top), (1, top), (2, 7)]:
        MatchResultFactory.create(season=season, player_id=player, points=points, achieved_at=at(9))
    result = season_close(season_id=season.id, now=AFTER, grace_seconds=0)
    assert (result.outcome, result.standings) == (CloseOutcome.CLOSED, 1)
    assert standings(season.id) == [(1, 2, 7, at(9))]


@pytest.mark.django_db
def test_close_season_command(best_season: Season) -> None:
    out = StringIO()
    call_command(
        "close_season", "--season", str(best_season.id), "--grace-seconds", "0", stdout=out
    )
    assert f"season {best_season.id} closed: 6 final standings, 5 reward grants" in out.getvalue()
    out = StringIO()
    call_command("close_season", "--season", str(best_season.id), stdout=out)
    assert "already closed: nothing granted" in out.getvalue()
    with pytest.raises(CommandError, match="season 999999 does not exist"):
        call_command("close_season", "--season", "999999")
    with pytest.raises(CommandError, match="--grace-seconds: must be 0 to"):
        call_command("close_season", "--season", "1", "--grace-seconds", "-1")


@pytest.mark.django_db
def test_banned_players_get_no_standing_and_no_grant(best_season: Season) -> None:
    from leaderboard.models import PlayerBan

    PlayerBan.objects.create(season=best_season, player_id=1, reason="cheating")
    season_close(season_id=best_season.id, now=AFTER, grace_seconds=0)
    assert [row[1] for row in standings(best_season.id)] == [2, 3, 5, 4, 6]
    assert [(g[0], g[1], g[2]) for g in grants(best_season.id)] == [
        (1, 2, "crown"),
        (2, 3, "gems"),
        (3, 5, "gems"),
        (5, 6, "badge"),
    ]


@pytest.mark.django_db(transaction=True)
def test_a_close_out_finding_another_running_returns_at_once(best_season: Season) -> None:
    import threading

    from django.db import connection, transaction

    locked, release = threading.Event(), threading.Event()

    def hold_the_season() -> None:
        try:
            with transaction.atomic():
                Season.objects.select_for_update().get(id=best_season.id)
                locked.set()
                release.wait(timeout=30)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_the_season)
    holder.start()
    try:
        assert locked.wait(timeout=10)
        result = season_close(season_id=best_season.id, now=AFTER, grace_seconds=0)
        assert result.outcome == CloseOutcome.IN_PROGRESS
        assert "another close-out of it is running" in result.describe()
    finally:
        release.set()
        holder.join(timeout=10)
    assert Season.objects.get(id=best_season.id).status == SeasonStatus.ACTIVE
    assert season_close(season_id=best_season.id, now=AFTER, grace_seconds=0).outcome == (
        CloseOutcome.CLOSED
    )


@pytest.mark.django_db
def test_keys_left_by_a_close_out_stopped_after_its_commit_are_unlinked_by_the_sweep(
    best_season: Season, board_redis, monkeypatch
) -> None:
    season = best_season
    board_key = keys.board(board_id=main_board_id(season.id))

    def killed(*, season_id: int) -> int:
        raise RuntimeError("the worker was killed here")

    monkeypatch.setattr(close_out_module, "season_keys_unlink", killed)
    with pytest.raises(RuntimeError):
        season_close(season_id=season.id, now=AFTER, grace_seconds=0)
    monkeypatch.undo()
    stopped = Season.objects.get(id=season.id)
    assert (stopped.status, stopped.keys_released_at) == (SeasonStatus.CLOSED, None)
    assert board_redis.exists(board_key) == 1
    # Left alone while a close-out may still be at it; taken up after the grace.
    assert seasons_keys_unreleased(closed_before=AFTER - timedelta(seconds=1)) == []
    assert seasons_keys_unreleased(closed_before=AFTER + timedelta(minutes=5)) == [season.id]
    queued: list[int] = []
    monkeypatch.setattr(season_close_task, "delay", lambda *, season_id: queued.append(season_id))
    seasons_close_due_task()
    assert season.id in queued

    # What the queued task runs: a close-out of a closed season only unlinks.
    again = season_close(season_id=season.id, now=AFTER + timedelta(minutes=6), grace_seconds=0)
    assert again.outcome == CloseOutcome.ALREADY_CLOSED
    assert board_redis.exists(board_key) == 0
    assert Season.objects.get(id=season.id).keys_released_at is not None
    assert seasons_keys_unreleased(closed_before=AFTER + timedelta(days=1)) == []
