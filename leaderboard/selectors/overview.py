"""What staff see of a live board (the board admin)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from .. import keys
from ..redis import get_board_redis
from .boards import BoardRef
from .rankings import BoardUnavailableError, RankingEntry, board_ranks_get
from .top import top_snapshot_decode


@dataclass(frozen=True)
class BoardOverview:
    board: BoardRef
    size: int
    top: list[RankingEntry]
    snapshot_refreshed_at: datetime | None


def board_overview_get(*, board: BoardRef, limit: int = 100) -> BoardOverview:
    """What staff see of a live board: its size, its top ``limit`` as the API ranks it, and when
    the top-list snapshot was last refreshed (read from Redis, not from this process's memo)."""
    client = get_board_redis()
    size = int(client.zcard(keys.board(board_id=board.id)))
    try:
        top = board_ranks_get(board=board, start_rank=1, count=limit)
    except BoardUnavailableError:
        # Staff see the board's size (0 or partial) and an empty top while it is recovered.
        top = []
    raw = client.get(keys.top_snapshot(board_id=board.id))
    snapshot = None if raw is None else top_snapshot_decode(raw=raw, board_id=board.id)
    refreshed = None if snapshot is None else datetime.fromtimestamp(snapshot.generated_at, UTC)
    return BoardOverview(board=board, size=size, top=top, snapshot_refreshed_at=refreshed)
