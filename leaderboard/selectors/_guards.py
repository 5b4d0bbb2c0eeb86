"""The keys that vouch for a board in Redis, which every read script of a board requires."""

from __future__ import annotations

from seasons.models import SeasonStatus

from .. import keys
from .boards import BoardRef


def guard_keys(board: BoardRef, *, on_master: bool = True) -> list[str]:
    """The keys the read scripts require: the board's intact key and, on the master, its
    checked key (never replicated: a replica read can vouch only for the intact one); none for
    a closed season's board (its keys are dropped at close-out, and an empty answer is then the
    truth: the final standings are elsewhere)."""
    if board.season.status == SeasonStatus.CLOSED:
        return []
    guards = [keys.board_intact(board_id=board.id)]
    if on_master:
        guards.append(keys.board_checked(board_id=board.id))
    return guards
