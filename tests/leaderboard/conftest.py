"""Fixtures of the leaderboard tests."""

from __future__ import annotations

import pytest

from seasons.models import Season, SeasonStatus
from tests.helpers import make_season
from tests.leaderboard.board_fixtures import write_season_board


@pytest.fixture
def season(board_redis) -> Season:
    """An active season whose main board holds KNOWN_BOARD, written straight into Redis (and
    marked intact): the reads answer from it."""
    season: Season = make_season(status=SeasonStatus.ACTIVE)
    write_season_board(board_redis, season)
    return season
