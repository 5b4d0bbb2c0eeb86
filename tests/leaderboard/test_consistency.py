"""Reads stay consistent while the board changes: one script, one board state."""

from __future__ import annotations

import itertools
import random
import threading

import pytest

from leaderboard import keys
from leaderboard.redis import get_board_redis
from leaderboard.selectors.rankings import board_around_get, board_player_get
from seasons.selectors import SeasonRef
from tests.helpers import as_board, main_board_id, make_season

from .board_fixtures import write_season_board

pytestmark = pytest.mark.django_db


def test_around_is_consistent_while_the_board_is_written(board_redis):
    season = make_season()
    ref = SeasonRef.from_model(season)
    codec = as_board(ref).codec
    # Few distinct points: many equal points, and identical scores when the ticks collide.
    write_season_board(
        board_redis, season, {player: (player % 20, player % 3) for player in range(1, 501)}
    )
    key = keys.board(board_id=main_board_id(season.id))
    stop = threading.Event()
    writes = 0

    def writer() -> None:
        nonlocal writes
        # The application's client (standalone or cluster); it is thread-safe and pooled.
        client = get_board_redis()
        rng = random.Random(7)
        while not stop.is_set():
            mapping = {
                str(rng.randint(1, 600)): codec.encode(
                    points=rng.randint(0, 25), elapsed_ticks=rng.randint(0, 3)
                )
                for _ in range(50)
            }
            client.zadd(key, mapping)
            writes += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(300):
            window = board_around_get(board=as_board(ref), player_id=250, radius=10)
            assert 250 in [entry.player_id for entry in window]
            for above, below in itertools.pairwise(window):
                assert above.points >= below.points
                assert above.rank <= below.rank
                if above.rank == below.rank:
                    assert above.points == below.points
            standing = board_player_get(board=as_board(ref), player_id=250)
            assert standing is not None
            assert 1 <= standing.entry.rank <= standing.total
    finally:
        stop.set()
        thread.join()
    # The board really moved while it was read.
    assert writes > 10
