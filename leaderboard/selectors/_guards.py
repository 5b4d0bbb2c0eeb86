"""The keys that vouch for a board in Redis, which every read script of a board requires."""

from __future__ import annotations

from seasons.models import SeasonStatus

from .. import keys
from .boards import BoardRef


def guard_keys(board: BoardRef, *, on_master: bool = True) -> list[str]:
    """The keys the read scripts require: the board's intact key and, on the master, its
    checked key (``master_guard_keys``); none for a closed season's board (its keys are dropped
    at close-out, and an empty answer is then the truth: the final standings are elsewhere)."""
    if board.season.status == SeasonStatus.CLOSED:
        return []
    return [keys.board_intact(board_id=board.id), *(master_guard_keys(board) if on_master else [])]


def master_guard_keys(board: BoardRef) -> list[str]:
    """The guard only a master can vouch for: the board's checked key, never replicated (a
    replica read can vouch only for the intact one, and a replica just promoted holds none, so
    its reads answer 503 until the recovery has compared the board with PostgreSQL)."""
    if board.season.status == SeasonStatus.CLOSED:
        return []
    return [keys.board_checked(board_id=board.id)]
