"""Dropping a season's boards from Redis once its close-out copied what it needs."""

from __future__ import annotations

from leaderboard import keys
from leaderboard.redis import get_board_redis
from leaderboard.selectors.boards import board_list


def season_keys_unlink(*, season_id: int) -> int:
    """UNLINK (free memory off the main thread) every Redis key of every board of the season;
    returns how many. One board at a time: a board's keys share one cluster slot, so each
    UNLINK names keys of one slot only."""
    client = get_board_redis()
    unlinked = 0
    for board in board_list(season_id=season_id):
        batch: list[bytes] = []
        for key in client.scan_iter(match=keys.board_pattern(board_id=board.id), count=1000):
            batch.append(key)
            if len(batch) >= 500:
                unlinked += int(client.unlink(*batch))
                batch.clear()
        if batch:
            unlinked += int(client.unlink(*batch))
    return unlinked
