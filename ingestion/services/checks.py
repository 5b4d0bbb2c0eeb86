"""The checks a message needs its season and board for, shared by both entrances.

The Kafka consumer's batch handler and the HTTP door run the same checks
(``ingestion.schema``) against the same query, so both reject the same input alike.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from leaderboard.selectors import BoardRef, boards_of_seasons
from seasons.models import Season

from ..schema import (
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


def messages_check_boards(
    *, messages: Sequence[tuple[int, MatchResultMessage]]
) -> tuple[dict[int, BoardRef], list[tuple[int, int]], list[tuple[int, MessageRejected]]]:
    """Check each (index, message) against its season and board, one query for the lot
    (statuses change: no cache). Returns the boards, (index, board id) of the valid ones and
    (index, rejection) of the others."""
    seasons = Season.objects.in_bulk({message.season_id for _, message in messages})
    boards = boards_of_seasons(season_ids=set(seasons))
    not_after = latest_achieved_at()
    valid: list[tuple[int, int]] = []
    rejected: list[tuple[int, MessageRejected]] = []
    for index, message in messages:
        board = boards.get((message.season_id, message.board))
        try:
            message_check_board(message, seasons.get(message.season_id), board)
            message_check_not_future(message, not_after=not_after)
        except MessageRejected as exc:
            rejected.append((index, exc))
            continue
        except Exception as exc:
            # A bug, not bad input: the message is set aside (and the bug logged), never a stop.
            logger.exception("unexpected error checking message %d of the batch", index)
            rejected.append((index, MessageRejected(UNEXPECTED, f"{type(exc).__name__}: {exc}")))
            continue
        assert board is not None
        valid.append((index, board.id))
    return {board.id: board for board in boards.values()}, valid, rejected
