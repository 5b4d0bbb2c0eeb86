"""Boards built from known inputs, written straight into Redis with the season's codec."""

from __future__ import annotations

from datetime import date

from leaderboard import keys
from leaderboard.services import board_mark_intact
from seasons.models import Season
from tests.helpers import as_board, main_board_id

# player id: (points, elapsed ticks). Ranked:
#   2 (500 @5) r1 · 1 (500 @10) r2 · 3 (400) r3 · 5 and 4 (300 @7: identical scores) r4, r4 ·
#   10 (300 @8) r6 · 6 (100) r7
# Ids 10 vs 2 and 5 vs 4 make sure Redis's member-lexical order never decides a rank.
KNOWN_BOARD = {
    1: (500, 10),
    2: (500, 5),
    3: (400, 1),
    4: (300, 7),
    5: (300, 7),
    10: (300, 8),
    6: (100, 0),
}


def write_board(client, key: str, season: Season, entries: dict[int, tuple[int, int]]) -> None:
    """Write the board by hand and mark it intact, as a recovery does once Redis holds what
    PostgreSQL has: these boards stand for the truth (no stored results behind them)."""
    board = as_board(season)
    codec = board.codec
    board_mark_intact(board_id=board.id)
    client.zadd(
        key,
        {
            str(player): codec.to_redis(codec.encode(points=points, elapsed_ticks=ticks))
            for player, (points, ticks) in entries.items()
        },
    )


def write_season_board(client, season: Season, entries=KNOWN_BOARD) -> None:
    write_board(client, keys.board(board_id=main_board_id(season.id)), season, entries)


def write_daily_board(client, season: Season, day: date, entries) -> None:
    write_board(
        client, keys.daily_board(board_id=main_board_id(season.id), day=day), season, entries
    )


def entry(
    rank: int, player: int, points: int, name: str | None = None, country: str | None = None
) -> dict[str, int | str | None]:
    """An entry as the API answers it (no name unless given: the player has no profile)."""
    return {
        "rank": rank,
        "playerId": player,
        "points": points,
        "displayName": name,
        "country": country,
    }
