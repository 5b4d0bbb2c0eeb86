"""Rank events: the boards' outboxes published to Kafka, then trimmed (docs/events.md).

The apply scripts write each call's events to the board's outbox stream in the same atomic
call as the board and its watermark. The consumer publishes those entries and only then deletes
them and commits the batch's offsets: a crash before the deletion leaves them in the outbox,
and whoever applies the partition next (the redelivery meets the watermark) publishes them
again with the same ids.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from leaderboard.rank_events import OutboxEntry, RankEventSink, outbox_lines
from leaderboard.redis import get_board_redis

logger = logging.getLogger(__name__)


def rank_events_publish(*, entries: Sequence[OutboxEntry], sink: RankEventSink) -> int:
    """Send the events of ``entries`` (in their order) and wait for Kafka's acknowledgement;
    the number sent. Safe to repeat: a repeat sends the same events, same ids."""
    messages = [message for entry in entries for message in outbox_lines(entry.payload)]
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
