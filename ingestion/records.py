"""The records a batch arrives as, and the dead letters it sets aside.

Kept free of kafka-python types and of Django, so the batch handler, the dead-letter sink and
the tests share them. The results themselves travel through the batch column by column
(``services.batch``), not as one object each.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol


class Record(Protocol):
    """What the handler reads of a Kafka record: kafka-python's ``ConsumerRecord`` as polled
    (no copy per record), or a ``ConsumedRecord``."""

    @property
    def partition(self) -> int: ...

    @property
    def offset(self) -> int: ...

    @property
    def key(self) -> bytes | None: ...

    @property
    def value(self) -> bytes | None: ...


class ConsumedRecord(NamedTuple):
    """A Kafka record made by hand (tests, benchmarks, a replay)."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


class DeadLetter(NamedTuple):
    record: Record
    code: str
    reason: str
