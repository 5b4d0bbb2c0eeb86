"""The checks a message needs its season and board for, shared by both entrances.

The Kafka consumer's batch handler and the HTTP door run the same checks
(``ingestion.schema``) against the same query, so both reject the same input alike.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from leaderboard.selectors.boards import BoardRef, boards_of_seasons
from seasons.models import Season

from ..schema import (
    SEASON_STATUSES_REJECTING,
    TIEBREAK_VALUE_MAX,
    UNEXPECTED,
    MatchResultMessage,
    MessageRejected,
    message_check_board,
    message_check_not_future,
)

logger = logging.getLogger(__name__)


def latest_achieved_at() -> datetime:
    """The latest achievedAt accepted now: later is ``achieved_in_future`` (both entrances)."""
    return timezone.now() + timedelta(seconds=settings.INGEST_MAX_FUTURE_SKEW_SECONDS)


@dataclass(frozen=True, slots=True)
class BoardsChecked:
    boards: dict[int, BoardRef]  # every board of the messages' seasons, by id
    board_ids: list[int | None]  # per message, in order: its board, or None when rejected
    rejected: list[tuple[int, MessageRejected]]  # (index of the message, why)


def messages_check_boards(*, messages: Sequence[MatchResultMessage]) -> BoardsChecked:
    """Check each message against its season and board, one query for the lot (statuses
    change: no cache).

    What passes is decided per (season, board) once: the board and the bounds a message must
    be within (the season's window, the board's points, now plus the allowed skew). A
    message within them passes; any other goes through the schema's checks
    (``message_check_board``, ``message_check_not_future``), which decide it and word its
    rejection. The shortcut passes exactly what those checks pass.
    """
    seasons = Season.objects.in_bulk({message.season_id for message in messages})
    by_key = boards_of_seasons(season_ids=set(seasons))
    not_after = latest_achieved_at()
    # (season id, board slug) -> (board id, earliest and latest achievedAt, most points, the
    # tie-break column names: a message passes with exactly these, or none on a plain board).
    accepting = {
        key: (
            board.id,
            season.starts_at,
            min(season.ends_at, not_after),
            board.max_points,
            frozenset(board.tiebreak_names),
        )
        for key, board in by_key.items()
        if (season := seasons.get(key[0])) is not None
        and season.status not in SEASON_STATUSES_REJECTING
    }
    board_ids: list[int | None] = []
    rejected: list[tuple[int, MessageRejected]] = []
    for index, message in enumerate(messages):
        try:
            bounds = accepting.get((message.season_id, message.board))
            if bounds is not None:
                board_id, earliest, latest, max_points, names = bounds
                sent = message.tiebreakers
                if (
                    earliest <= message.achieved_at <= latest
                    and message.points <= max_points
                    and (
                        sent is None
                        if not names
                        else sent is not None
                        and sent.keys() == names
                        and all(0 <= value <= TIEBREAK_VALUE_MAX for value in sent.values())
                    )
                ):
                    board_ids.append(board_id)
                    continue
            board = by_key.get((message.season_id, message.board))
            message_check_board(message, seasons.get(message.season_id), board)
            message_check_not_future(message, not_after=not_after)
        except MessageRejected as exc:
            rejected.append((index, exc))
            board_ids.append(None)
            continue
        except Exception as exc:
            # A bug, not bad input: the message is set aside (and the bug logged), never a stop.
            logger.exception("unexpected error checking message %d of the batch", index)
            rejected.append((index, MessageRejected(UNEXPECTED, f"{type(exc).__name__}: {exc}")))
            board_ids.append(None)
            continue
        assert board is not None
        board_ids.append(board.id)
    return BoardsChecked({board.id: board for board in by_key.values()}, board_ids, rejected)
