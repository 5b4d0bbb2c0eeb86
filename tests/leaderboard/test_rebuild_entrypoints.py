from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command

from leaderboard import keys
from leaderboard.models import RebuildRun, RunStatus
from leaderboard.tasks import board_rebuild_task
from tests.helpers import make_season
from tests.leaderboard import live

pytestmark = pytest.mark.django_db(transaction=True)


def test_command_rebuilds_the_season_and_a_day(board_redis, capsys):
    season = make_season()
    r = live.ingest(
        board_redis, season, player_id=4, points=9, at=season.starts_at + timedelta(hours=2)
    )
    key = keys.season_board(season_id=season.id)
    day_key = keys.daily_board(season_id=season.id, day=r.achieved_at.date())
    expected, expected_day = live.board(board_redis, key), live.board(board_redis, day_key)
    board_redis.delete(key, day_key)
    call_command("rebuild_leaderboard", "--season", str(season.id))
    call_command(
        "rebuild_leaderboard", "--season", str(season.id), "--day", r.achieved_at.date().isoformat()
    )
    assert live.board(board_redis, key) == expected
    assert live.board(board_redis, day_key) == expected_day
    assert "Rebuilt season" in capsys.readouterr().out
    assert list(RebuildRun.objects.values_list("status", flat=True)) == [RunStatus.SUCCEEDED] * 2


def test_command_rejects_bad_input():
    with pytest.raises(CommandError, match="does not exist"):
        call_command("rebuild_leaderboard", "--season", "424242")
    with pytest.raises(CommandError, match="not a date"):
        call_command("rebuild_leaderboard", "--season", "1", "--day", "2026-13-01")


def test_task_rebuilds_by_id(board_redis):
    season = make_season()
    live.ingest(board_redis, season, player_id=4, points=9, at=season.starts_at)
    key = keys.season_board(season_id=season.id)
    expected = live.board(board_redis, key)
    board_redis.delete(key)
    assert board_rebuild_task.apply(args=(season.id,)).get() == 1
    assert live.board(board_redis, key) == expected
