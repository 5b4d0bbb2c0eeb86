from __future__ import annotations

import subprocess
import sys
from datetime import timedelta

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from leaderboard import keys
from leaderboard.models import RebuildRun, RunStatus
from leaderboard.tasks import board_rebuild_task
from tests.helpers import board_read, main_board_id, make_season
from tests.leaderboard import live

pytestmark = pytest.mark.django_db(transaction=True)


def test_command_rebuilds_the_season_and_a_day(board_redis, capsys):
    season = make_season()
    r = live.ingest(
        board_redis, season, player_id=4, points=9, at=season.starts_at + timedelta(hours=2)
    )
    key = keys.board(board_id=main_board_id(season.id))
    day_key = keys.daily_board(board_id=main_board_id(season.id), day=r.achieved_at.date())
    expected, expected_day = board_read(board_redis, key), board_read(board_redis, day_key)
    board_redis.delete(key, day_key)
    call_command("rebuild_leaderboard", "--season", str(season.id))
    call_command(
        "rebuild_leaderboard", "--season", str(season.id), "--day", r.achieved_at.date().isoformat()
    )
    assert board_read(board_redis, key) == expected
    assert board_read(board_redis, day_key) == expected_day
    assert "Rebuilt season" in capsys.readouterr().out
    assert list(RebuildRun.objects.values_list("status", flat=True)) == [RunStatus.SUCCEEDED] * 2


def test_command_rejects_bad_input():
    with pytest.raises(CommandError, match="does not exist"):
        call_command("rebuild_leaderboard", "--season", "424242")
    with pytest.raises(CommandError, match="not a date"):
        call_command("rebuild_leaderboard", "--season", "1", "--day", "2026-13-01")
    # From the command line: argparse's usage and reason, not a traceback.
    run = subprocess.run(
        [sys.executable, "manage.py", "rebuild_leaderboard", "--season", "1", "--day", "2026-13"],
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 2, run.stderr
    assert "argument --day: '2026-13' is not a date (YYYY-MM-DD)" in run.stderr
    assert "Traceback" not in run.stderr


def _two_days(board_redis, season):
    """Results on two days; returns (season key, {day key: its live board})."""
    day_keys: list[str] = []
    for hours, player in [(2, 4), (26, 5), (27, 4)]:
        r = live.ingest(
            board_redis,
            season,
            player_id=player,
            points=hours,
            at=season.starts_at + timedelta(hours=hours),
        )
        day_key = keys.daily_board(board_id=main_board_id(season.id), day=r.achieved_at.date())
        if day_key not in day_keys:
            day_keys.append(day_key)
    days = {day_key: board_read(board_redis, day_key) for day_key in day_keys}
    return keys.board(board_id=main_board_id(season.id)), days


def test_task_rebuilds_the_season_and_its_daily_boards_and_keeps_a_week_missing_a_day(
    board_redis,
):
    season = make_season()
    key, days = _two_days(board_redis, season)
    expected = board_read(board_redis, key)
    first_day, second_day = days
    (iso_year, iso_week, _) = season.starts_at.isocalendar()
    weekly = keys.weekly_board(
        board_id=main_board_id(season.id), iso_year=iso_year, iso_week=iso_week
    )
    board_redis.zadd(weekly, {"999": 1})  # a weekly board in Redis, drifted
    board_redis.delete(key)
    board_redis.zadd(first_day, {"999": 1})  # a daily board in Redis, drifted
    board_redis.delete(second_day)  # an expired daily board stays expired

    outcome = board_rebuild_task.apply(args=(main_board_id(season),)).get()

    assert "1 daily and 0 weekly" in outcome
    assert board_read(board_redis, key) == expected
    assert board_read(board_redis, first_day) == days[first_day]
    assert not board_redis.exists(second_day)
    # The week's second day is gone from Redis: rebuilt from the first alone, the week would
    # lose that day's players, so it is left as it was (--all-days brings the days back and
    # rebuilds it whole: test_corrections.py).
    assert "999" in {m.decode() for m in board_redis.zrange(weekly, 0, -1)}
    assert sorted(str(d) for d in RebuildRun.objects.values_list("day", flat=True)) == sorted(
        ["None", first_day.rsplit(":", 1)[-1]]
    )


def test_command_all_days_brings_back_every_daily_board(board_redis, capsys):
    season = make_season()
    key, days = _two_days(board_redis, season)
    expected = board_read(board_redis, key)
    board_redis.delete(key, *days)

    call_command("rebuild_leaderboard", "--season", str(season.id), "--all-days")

    assert board_read(board_redis, key) == expected
    for day_key, board in days.items():
        assert board_read(board_redis, day_key) == board
    assert "2 daily" in capsys.readouterr().out
    with pytest.raises(CommandError, match="not allowed with"):
        call_command(
            "rebuild_leaderboard", "--season", str(season.id), "--all-days", "--day", "2026-10-01"
        )
