"""What the boards' rank events outboxes still hold (entries not yet acknowledged by Kafka)."""

from __future__ import annotations

from collections.abc import Sequence

from leaderboard.rank_events import OutboxEntry, outbox_entries_merge
from leaderboard.redis import get_board_redis

# An outbox holds the entries of calls whose events are not published yet: one per call of a
# batch in flight, more only after a crash. Read in pages of this many.
_PAGE = 500


def rank_events_outbox_read(*, outboxes: Sequence[str]) -> list[OutboxEntry]:
    """Every entry of ``outboxes`` (stream keys, any slots), in each stream's order."""
    client = get_board_redis()
    found: list[OutboxEntry] = []
    todo = dict.fromkeys(outboxes, "-")
    while todo:
        pipe = client.pipeline(transaction=False)
        names = sorted(todo)
        for outbox in names:
            pipe.xrange(outbox, min=todo[outbox], count=_PAGE)
        for outbox, entries in zip(names, pipe.execute(), strict=True):
            for entry_id, fields in entries:
                found.append(OutboxEntry(outbox, entry_id.decode(), fields[b"events"]))
            if len(entries) < _PAGE:
                del todo[outbox]
            else:
                todo[outbox] = "(" + entries[-1][0].decode()
    return outbox_entries_merge(found)
