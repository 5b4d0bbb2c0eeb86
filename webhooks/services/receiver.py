"""The demo receiver's memory: the last requests it got, kept in Redis for the staff page."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from leaderboard import keys
from leaderboard.redis import get_board_redis

# Requests kept (newest first); older ones are trimmed on each write.
DEMO_RECEIPTS_KEPT = 50


@dataclass(frozen=True, slots=True)
class DemoReceipt:
    received_at: float
    endpoint_id: int
    delivery_id: str
    verified: bool
    reason: str  # why it was refused; empty when verified
    event_ids_header: str
    events: list[Any]  # the body's events (empty when it was not a JSON array)

    @property
    def received(self) -> datetime:
        return datetime.fromtimestamp(self.received_at, UTC)

    def to_json(self) -> bytes:
        return orjson.dumps(asdict(self))

    @classmethod
    def from_json(cls, raw: bytes) -> DemoReceipt:
        return cls(**orjson.loads(raw))


def demo_receipt_record(*, receipt: DemoReceipt) -> None:
    client = get_board_redis()
    key = keys.webhook_demo_receipts()
    pipe = client.pipeline(transaction=False)
    pipe.lpush(key, receipt.to_json())
    pipe.ltrim(key, 0, DEMO_RECEIPTS_KEPT - 1)
    pipe.execute()
