"""Which Kafka offsets the deliverer may commit: those of events no endpoint still owes.

An event read from ``rank-events`` is handed to every endpoint it matches; each of those holds
it until the endpoint has it (delivered) or PostgreSQL has it (kept for a retry). Endpoints
finish in any order, so a partition's committable offset is its lowest offset still held (or
one past the last read when none is): a crash before the commit re-reads every event some
endpoint did not have yet, and at worst re-sends some it had (at least once).

A partition this process loses in a rebalance is forgotten: holds still released on it later
(its events in an endpoint's queue) land on a retired record and cannot move the offsets of
a later assignment of the partition, which starts again from the group's committed offset.
"""

from __future__ import annotations

import heapq
import threading
from dataclasses import dataclass, field

from kafka.structs import TopicPartition


@dataclass(slots=True, eq=False)
class _Partition:
    next_offset: int = -1  # one past the last offset read; -1: nothing read yet
    holds: dict[int, int] = field(default_factory=dict)  # offset -> endpoints still owing it
    heap: list[int] = field(default_factory=list)  # the held offsets (stale entries popped late)
    committed: int = -1


@dataclass(frozen=True, slots=True, eq=False)
class Hold:
    """One endpoint's claim on one record; ``release`` once the endpoint has the event."""

    tracker: OffsetTracker
    partition: _Partition
    offset: int

    def release(self) -> None:
        self.tracker._release(self.partition, self.offset)


class OffsetTracker:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._partitions: dict[TopicPartition, _Partition] = {}

    def read(self, tp: TopicPartition, offset: int, *, holders: int) -> list[Hold]:
        """Record that ``offset`` was read and is owed to ``holders`` endpoints (0: none)."""
        with self._lock:
            part = self._partitions.get(tp)
            if part is None:
                part = self._partitions[tp] = _Partition()
            part.next_offset = max(part.next_offset, offset + 1)
            if holders <= 0:
                return []
            part.holds[offset] = part.holds.get(offset, 0) + holders
            heapq.heappush(part.heap, offset)
        return [Hold(self, part, offset) for _ in range(holders)]

    def _release(self, part: _Partition, offset: int) -> None:
        with self._lock:
            left = part.holds.get(offset, 0) - 1
            if left > 0:
                part.holds[offset] = left
            else:
                part.holds.pop(offset, None)

    def committable(self) -> dict[TopicPartition, int]:
        """Per partition, the offset to commit now where it moved since the last commit."""
        due: dict[TopicPartition, int] = {}
        with self._lock:
            for tp, part in self._partitions.items():
                while part.heap and part.heap[0] not in part.holds:
                    heapq.heappop(part.heap)
                offset = part.heap[0] if part.heap else part.next_offset
                if offset > part.committed and offset >= 0:
                    due[tp] = offset
        return due

    def committed(self, offsets: dict[TopicPartition, int]) -> None:
        with self._lock:
            for tp, offset in offsets.items():
                part = self._partitions.get(tp)
                if part is not None:
                    part.committed = max(part.committed, offset)

    def held(self) -> int:
        """Records some endpoint still owes (for the stats)."""
        with self._lock:
            return sum(len(part.holds) for part in self._partitions.values())

    def retain(self, assigned: set[TopicPartition]) -> None:
        """Forget every partition not in ``assigned`` (this process's assignment now)."""
        with self._lock:
            for tp in [tp for tp in self._partitions if tp not in assigned]:
                del self._partitions[tp]
