"""The player card: ``GET /api/players/{player}``, a player's profile and standing on every board.

``boards`` lists every board of
every active season on which the player has a score, each read from Redis like the board's own
player read (``board_player_get``: one script per board, ranks from one board state).
``percentile`` is that read's: the share of the board's players ranked at or below the player,
in percent, two decimals (``100 * (size - rank + 1) / size``: rank 1 is 100.0, the last of 200
is 0.5). A hidden profile answers ``displayName`` null; the rest of it stays.
"""

from __future__ import annotations

from dataclasses import dataclass

from players.selectors import player_profile_get
from seasons.models import SeasonStatus

from .boards import board_list_live
from .rankings import board_player_get


@dataclass(frozen=True, slots=True)
class CardBoard:
    season_id: int
    board: str
    rank: int
    points: int
    percentile: float


@dataclass(frozen=True, slots=True)
class PlayerCard:
    player_id: int
    display_name: str | None
    country: str | None
    avatar_url: str | None
    boards: tuple[CardBoard, ...]


def player_card_get(*, player_id: int) -> PlayerCard | None:
    """The player's card, or None when they have neither a profile nor a score on an active
    season's board."""
    standings: list[CardBoard] = []
    for board in board_list_live():
        if board.season.status != SeasonStatus.ACTIVE:
            continue
        standing = board_player_get(board=board, player_id=player_id, named=False)
        if standing is not None:
            standings.append(
                CardBoard(
                    season_id=board.season_id,
                    board=board.slug,
                    rank=standing.entry.rank,
                    points=standing.entry.points,
                    percentile=standing.percentile,
                )
            )
    profile = player_profile_get(player_id=player_id)
    if profile is None and not standings:
        return None
    return PlayerCard(
        player_id=player_id,
        display_name=None if profile is None else profile.visible_name,
        country=None if profile is None else profile.country,
        avatar_url=None if profile is None else profile.avatar_url,
        boards=tuple(standings),
    )
