"""The public board page (``leaderboard/views.py``): one read per period of the page, each the
period's list and then the player it looks up."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from .boards import BoardRef
from .rankings import (
    PlayerStanding,
    RankingEntry,
    board_around_get,
    board_player_get,
    board_ranks_get,
    daily_board_top_get,
    weekly_board_top_get,
)
from .top import TopList, board_top_get


@dataclass(frozen=True, slots=True)
class PlayerLookup:
    """A player looked up on a board: their standing and the entries around them, or neither
    when they have no score there."""

    player_id: int
    standing: PlayerStanding | None
    around: list[RankingEntry]


@dataclass(frozen=True, slots=True)
class BoardPage:
    entries: Sequence[RankingEntry]
    # The season's top list as read (its version and source give the ETag live.js starts from);
    # None for a deep page, a day or a week.
    top: TopList | None
    # None when no player was asked for.
    lookup: PlayerLookup | None


def _page_lookup(*, board: BoardRef, player_id: int | None, radius: int) -> PlayerLookup | None:
    if player_id is None:
        return None
    standing = board_player_get(board=board, player_id=player_id)
    around = (
        []
        if standing is None
        else board_around_get(board=board, player_id=player_id, radius=radius)
    )
    return PlayerLookup(player_id=player_id, standing=standing, around=around)


def board_season_page_get(
    *, board: BoardRef, start_rank: int, count: int, player_id: int | None, radius: int
) -> BoardPage:
    """The season-long list: the top ``count`` (from the snapshot) from rank 1, else a page of
    ``count`` from the 1-based position ``start_rank``; and the player looked up."""
    if start_rank > 1:
        entries: Sequence[RankingEntry] = board_ranks_get(
            board=board, start_rank=start_rank, count=count
        )
        top = None
    else:
        top = board_top_get(board=board, limit=count)
        entries = top.entries
    lookup = _page_lookup(board=board, player_id=player_id, radius=radius)
    return BoardPage(entries=entries, top=top, lookup=lookup)


def board_daily_page_get(
    *, board: BoardRef, day: date, count: int, player_id: int | None, radius: int
) -> BoardPage:
    """A UTC day's top ``count``, and the player looked up (on the season-long board)."""
    entries = daily_board_top_get(board=board, day=day, limit=count)
    lookup = _page_lookup(board=board, player_id=player_id, radius=radius)
    return BoardPage(entries=entries, top=None, lookup=lookup)


def board_weekly_page_get(
    *,
    board: BoardRef,
    iso_year: int,
    iso_week: int,
    count: int,
    player_id: int | None,
    radius: int,
    primary: bool = False,
) -> BoardPage:
    """An ISO week's top ``count`` (a board built beforehand, see weekly_board_ensure; read on
    the master when ``primary``), and the player looked up (on the season-long board)."""
    entries = weekly_board_top_get(
        board=board, iso_year=iso_year, iso_week=iso_week, limit=count, primary=primary
    )
    lookup = _page_lookup(board=board, player_id=player_id, radius=radius)
    return BoardPage(entries=entries, top=None, lookup=lookup)
