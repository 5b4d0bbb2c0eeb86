"""Rank events: the boards' outboxes published to Kafka, then trimmed; and the events of
corrections (docs/events.md).

The apply scripts write each call's events to the board's outbox stream in the same atomic
call as the board and its watermark. The consumer publishes those entries and only then deletes
them and commits the batch's offsets: a crash before the deletion leaves them in the outbox,
and whoever applies the partition next (the redelivery meets the watermark) publishes them
again with the same ids.

A correction (void, ban, unban) is applied by rebuilding the board: around that rebuild,
``correction_events_begin`` and ``correction_events_end`` (correction_events.lua) give each
player it concerns a rank_changed event if their rank moved, through the board's corrections
outbox.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from leaderboard import keys
from leaderboard.rank_events import OutboxEntry, RankEventSink, outbox_messages, rank_event_sink
from leaderboard.redis import get_board_redis
from leaderboard.scripts import get_script
from leaderboard.selectors.boards import BoardRef, board_list
from leaderboard.selectors.events import rank_events_outbox_read

from .apply import wide_spec_args

logger = logging.getLogger(__name__)


def rank_events_publish(*, entries: Sequence[OutboxEntry], sink: RankEventSink) -> int:
    """Send the events of ``entries`` (in their order) and wait for Kafka's acknowledgement;
    the number sent. Safe to repeat: a repeat sends the same events, same ids."""
    messages = [message for entry in entries for message in outbox_messages(entry.payload)]
    sink.publish(messages=messages)
    return len(messages)


def rank_events_outbox_trim(*, entries: Sequence[OutboxEntry]) -> None:
    """Delete published entries from their outboxes, by id: an entry another consumer added
    meanwhile (a rebalance) stays until it is published too."""
    if not entries:
        return
    pipe = get_board_redis().pipeline(transaction=False)
    for entry in entries:
        pipe.xdel(entry.outbox, entry.entry_id)
    pipe.execute()


# --- corrections ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CorrectionSubject:
    """A player a correction moves, and what its rank_changed event says of the cause."""

    player_id: int
    # "void:<result id>", "ban:<ban id>" or "unban:<season>:<player>:<unix seconds>": with the
    # board id, the event's cause (rank_event_id), the same on every retry of the correction.
    cause: str
    at: datetime  # when the correction was made (the event's "at")
    match_id: str | None = None  # the voided result's match
    board_id: int | None = None  # None: every board the correction rebuilds

    def as_task_arg(self) -> dict[str, Any]:
        return {
            "player_id": self.player_id,
            "cause": self.cause,
            "at": self.at.isoformat(),
            "match_id": self.match_id,
            "board_id": self.board_id,
        }

    @classmethod
    def from_task_arg(cls, raw: dict[str, Any]) -> CorrectionSubject:
        return cls(
            player_id=int(raw["player_id"]),
            cause=str(raw["cause"]),
            at=datetime.fromisoformat(raw["at"]),
            match_id=raw.get("match_id"),
            board_id=raw.get("board_id"),
        )


def _correction_call(
    *, board: BoardRef, mode: str, subjects: Sequence[CorrectionSubject]
) -> list[OutboxEntry]:
    board_key = keys.board(board_id=board.id)
    wide = board.wide_codec
    if wide is not None:
        kind, spec = "wide", [wide_spec_args(board)[1], wide.key_length, ""]
    else:
        codec = board.codec
        kind, spec = "plain", [board.order, codec.time_bits, codec.max_points]
    args: list[str | int] = [mode, kind, *spec, board.season_id, board.slug, board.id]
    args.append(len(subjects))
    for s in subjects:
        args += [s.player_id, s.cause, s.match_id or "-", int(s.at.timestamp())]
    outbox = keys.rank_events_corrections_outbox(board_id=board.id)
    reply = get_script(get_board_redis(), "correction_events")(
        keys=[
            board_key,
            keys.board_index(board_key=board_key) if wide is not None else board_key,
            keys.rank_events_corrections_pending(board_id=board.id),
            outbox,
            keys.board_intact(board_id=board.id),
        ],
        args=args,
    )
    if not reply[0]:
        return []
    return [OutboxEntry(outbox, reply[0].decode(), reply[1])]


def correction_events_begin(*, board: BoardRef, subjects: Sequence[CorrectionSubject]) -> None:
    """Before the rebuild that applies a correction: keep each player's standing now (a retry
    keeps the first one kept)."""
    if board.rank_events and subjects:
        _correction_call(board=board, mode="begin", subjects=subjects)


def correction_events_end(
    *, board: BoardRef, subjects: Sequence[CorrectionSubject]
) -> list[OutboxEntry]:
    """After the rebuild: a rank_changed event, in the board's corrections outbox, for each
    player whose rank moved (null once off the board)."""
    if not (board.rank_events and subjects):
        return []
    return _correction_call(board=board, mode="end", subjects=subjects)


def rank_events_corrections_relay(
    *, board_ids: Sequence[int], sink: RankEventSink | None = None
) -> int:
    """Publish everything the boards' corrections outboxes hold (what this correction wrote,
    and what a crashed one left), then trim it; the number of events sent. ``sink``: the
    process's rank-events producer when None (made only if there is something to send).
    Raises RankEventsNotDelivered when Kafka does not take them (they stay)."""
    entries = rank_events_outbox_read(
        outboxes=[keys.rank_events_corrections_outbox(board_id=b) for b in board_ids]
    )
    if not entries:
        return 0
    sent = rank_events_publish(entries=entries, sink=sink or rank_event_sink())
    rank_events_outbox_trim(entries=entries)
    return sent


def season_corrections_events_relay(*, season_id: int) -> int:
    """``rank_events_corrections_relay`` of every board of the season: before a close-out drops
    the season's keys, the events Kafka did not take when their correction ran go out."""
    return rank_events_corrections_relay(
        board_ids=[board.id for board in board_list(season_id=season_id)]
    )
