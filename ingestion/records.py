"""The values a batch passes through, from the Kafka record to the stored result.

Kept free of kafka-python types (the consumer copies what it needs out of each record) and of
Django, so the batch handler, the dead-letter sink and the tests share them.
"""

from __future__ import annotations

from typing import NamedTuple

from .schema import MatchResultMessage

# The per-result values of the hot path are typed NamedTuples, not frozen dataclasses: as
# immutable, and about three times cheaper to build (a frozen dataclass sets each field through
# object.__setattr__), which counts at 20,000 results a second.


class ConsumedRecord(NamedTuple):
    """One Kafka record as the handler needs it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


class DeadLetter(NamedTuple):
    record: ConsumedRecord
    code: str
    reason: str


class ValidResult(NamedTuple):
    partition: int
    offset: int
    message: MatchResultMessage
    board_id: int


class StoredResult(NamedTuple):
    """A valid result after the insert: new, or found already stored."""

    result: ValidResult
    xid: int | None  # the inserting transaction (None: legacy rows stored without it)
    # True when the stored row came from this very message (same partition and offset): it
    # was inserted now, or earlier and then the process died before it reached the boards.
    from_this_message: bool
    # Voided, or the player is banned from the season: stored, but not counted.
    excluded: bool
