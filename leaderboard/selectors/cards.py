"""The player card: ``GET /api/players/{player}``, a player's profile and standing on every board.

``boards`` lists every board of
every active season on which the player has a score, each read from Redis like the board's own
player read (``board_player_get``: one script per board, ranks from one board state).
``percentile`` is that read's: the share of the board's players ranked at or below the player,
in percent, two decimals (``100 * (size - rank + 1) / size``: rank 1 is 100.0, the last of 200
is 0.5). On a league board a row carries the player's ``tier`` (null while they are in no cohort
yet), and on any board with cohorts their ``cohort`` number (null likewise), both as the board's
own reads have them (selectors/leagues.py, selectors/cohorts.py: memoized per process once
found); a board without cohorts costs no more than its player read. A hidden profile answers
``displayName`` null; the rest of it stays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from players.selectors import player_profile_get
from seasons.models import SeasonStatus

from .boards import BoardRef, board_list_live
from .cohorts import player_cohort_number
from .leagues import entries_with_tiers
from .rankings import NOT_KEPT, BoardUnavailableError, RankingEntry, board_player_get


@dataclass(frozen=True, slots=True)
class CardBoard:
    season_id: int
    board: str
    rank: int
    points: int
    percentile: float
    # On a league board, the player's tier name (None while in no cohort yet); NOT_KEPT elsewhere.
    tier: Any = NOT_KEPT
    # On a board with cohorts, the player's cohort number (None while in none); NOT_KEPT
    # elsewhere.
    cohort: Any = NOT_KEPT


@dataclass(frozen=True, slots=True)
class PlayerCard:
    player_id: int
    display_name: str | None
    country: str | None
    avatar_url: str | None
    boards: tuple[CardBoard, ...]
    # The boards Redis cannot vouch for right now (lost, being recovered), as (season, slug):
    # the player's standing there is not known, not absent.
    recovering: tuple[tuple[int, str], ...] = ()


def player_card_get(*, player_id: int) -> PlayerCard | None:
    """The player's card, or None when they have neither a profile nor a score on an active
    season's board. A board being recovered is listed in ``recovering`` and the card answers
    with the others (one board's recovery made the whole card a 503)."""
    standings: list[CardBoard] = []
    recovering: list[tuple[int, str]] = []
    for board in board_list_live():
        if board.season.status != SeasonStatus.ACTIVE:
            continue
        try:
            standing = board_player_get(board=board, player_id=player_id, named=False)
        except BoardUnavailableError:
            recovering.append((board.season_id, board.slug))
            continue
        if standing is not None:
            tier, cohort = _card_cohort(board=board, entry=standing.entry)
            standings.append(
                CardBoard(
                    season_id=board.season_id,
                    board=board.slug,
                    rank=standing.entry.rank,
                    points=standing.entry.points,
                    percentile=standing.percentile,
                    tier=tier,
                    cohort=cohort,
                )
            )
    profile = player_profile_get(player_id=player_id)
    if profile is None and not standings and not recovering:
        return None
    return PlayerCard(
        player_id=player_id,
        display_name=None if profile is None else profile.visible_name,
        country=None if profile is None else profile.country,
        avatar_url=None if profile is None else profile.avatar_url,
        boards=tuple(standings),
        recovering=tuple(recovering),
    )


def _card_cohort(*, board: BoardRef, entry: RankingEntry) -> tuple[Any, Any]:
    """The player's tier and cohort number on the board, each NOT_KEPT where the board has
    none (no lookup at all then)."""
    tier: Any = NOT_KEPT
    if board.tiers:
        tier = entries_with_tiers(board=board, entries=[entry])[0].tier
    if board.cohort_size is None:
        return tier, NOT_KEPT
    if tier is None:
        # No cohort (the tier is the cohort's, read from the same membership): a board waiting
        # for its league's close-out asks PostgreSQL no second time per card.
        return tier, None
    return tier, player_cohort_number(board=board, player_id=entry.player_id)
