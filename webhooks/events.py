"""Rank events as the deliverer reads them from Kafka (contract 0.3, "Rank events").

The deliverer checks only what it needs to route and label an event: a JSON object with an
``eventId`` (the receivers' deduplication key, also sent in a header: no comma or whitespace),
a ``type``, a ``seasonId`` and a ``board``. Everything else is passed through untouched, so a
field the write path adds later reaches the receivers without a change here. An event that
fails these checks is a dead letter with its reason (``DEAD_LETTER_CODES``); the rest of the
batch goes on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

EVENT_TYPES = (
    "personal_best",
    "rank_changed",
    "entered_top",
    "left_top",
    "overtaken",
    "season_final",
)
_EVENT_ID = re.compile(r"[\x21-\x2b\x2d-\x7e]{1,200}")  # printable ASCII, no space or comma

INVALID_JSON = "invalid_json"
INVALID_EVENT = "invalid_event"
DEAD_LETTER_CODES = (INVALID_JSON, INVALID_EVENT)


class EventRejected(Exception):
    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


@dataclass(frozen=True, slots=True)
class RankEvent:
    """One event as read, with the fields routing needs; ``raw`` is the value as published."""

    event_id: str
    type: str
    board: str  # "<season>/<slug>", the form endpoints filter on
    raw: bytes

    def payload(self) -> Any:
        return orjson.loads(self.raw)


def board_label(*, season_id: int, slug: str) -> str:
    return f"{int(season_id)}/{slug}"


def rank_event_decode(value: bytes | None) -> RankEvent:
    """Decode one Kafka value, or raise EventRejected with its code and reason."""
    if value is None:
        raise EventRejected(INVALID_JSON, "empty message (a tombstone)")
    try:
        body = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise EventRejected(INVALID_JSON, f"not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise EventRejected(INVALID_EVENT, "not a JSON object")
    event_id = body.get("eventId")
    if not isinstance(event_id, str) or not _EVENT_ID.fullmatch(event_id):
        raise EventRejected(
            INVALID_EVENT, "eventId must be 1-200 printable ASCII characters, no comma or space"
        )
    event_type = body.get("type")
    if not isinstance(event_type, str) or not event_type:
        raise EventRejected(INVALID_EVENT, "type must be a non-empty string")
    season_id = body.get("seasonId")
    if not isinstance(season_id, int) or isinstance(season_id, bool):
        raise EventRejected(INVALID_EVENT, "seasonId must be an integer")
    slug = body.get("board")
    if not isinstance(slug, str) or not slug:
        raise EventRejected(INVALID_EVENT, "board must be a non-empty string")
    return RankEvent(
        event_id=event_id,
        type=event_type,
        board=board_label(season_id=season_id, slug=slug),
        raw=bytes(value),
    )


def batch_body(raw_events: list[bytes]) -> bytes:
    """The POST body: the events' own JSON objects in a JSON array (no re-encoding)."""
    return b"[" + b",".join(raw_events) + b"]"
