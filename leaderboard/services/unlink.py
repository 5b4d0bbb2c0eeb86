"""Dropping a season's boards from Redis once its close-out copied what it needs."""

from __future__ import annotations

from leaderboard import keys
from leaderboard.redis import get_board_redis


def season_keys_unlink(*, season_id: int) -> int:
    """UNLINK (free memory off the main thread) every Redis key of the season; returns how many."""
    client = get_board_redis()
    unlinked = 0
    batch: list[bytes] = []
    for key in client.scan_iter(match=keys.season_pattern(season_id=season_id), count=1000):
        batch.append(key)
        if len(batch) >= 500:
            unlinked += int(client.unlink(*batch))
            batch.clear()
    if batch:
        unlinked += int(client.unlink(*batch))
    return unlinked
