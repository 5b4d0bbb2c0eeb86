"""How many players each board holds in Redis."""

from __future__ import annotations

from collections.abc import Sequence

from .. import keys
from ..redis import get_board_redis
from ..scripts import ScriptCall, get_script, scripts_pipelined
from ._guards import guard_keys
from .boards import BoardRef


def board_sizes_get(*, boards: Sequence[BoardRef]) -> dict[int, int]:
    """Each board's number of players in Redis (one pipelined ZCARD per board)."""
    pipe = get_board_redis().pipeline(transaction=False)
    for board in boards:
        pipe.zcard(keys.board(board_id=board.id))
    return {board.id: int(size) for board, size in zip(boards, pipe.execute(), strict=True)}


def board_sizes_known_get(*, boards: Sequence[BoardRef]) -> dict[int, int | None]:
    """Each board's number of players, or None while Redis does not hold the board as truth
    (its intact key missing, or a recovery rebuilding it): the boards list never passes a lost
    board's 0 or partial count for its size. One ``board_size.lua`` per board, pipelined."""
    if not boards:
        return {}
    client = get_board_redis()
    script = get_script(client, "board_size")
    calls = [
        ScriptCall(
            script=script,
            keys=[
                keys.board(board_id=board.id),
                keys.board_recovering(board_id=board.id),
                *guard_keys(board),
            ],
            args=[],
        )
        for board in boards
    ]
    replies = scripts_pipelined(client, calls)
    return {
        board.id: None if int(size) == -1 else int(size)
        for board, size in zip(boards, replies, strict=True)
    }
