"""Rank events (contract 0.3): what they are on the wire, their ids, and the Kafka producer.

Topic ``KAFKA_RANK_EVENTS_TOPIC`` (default ``rank-events``), key = the player id as a decimal
string, value = one UTF-8 JSON object::

    {"eventId", "type", "seasonId", "board", "playerId", "rank", "previousRank", "points",
     "previousPoints", "matchId", "otherPlayerId", "at"}

(``season_final`` adds ``reward``). The apply scripts compute the events of match results and
corrections and write them to the boards' outboxes in a compact form (leaderboard/lua/common.lua),
which ``outbox_messages`` turns into these (the same bytes as ``RankEvent.value``); the
close-out builds its own here. docs/events.md says when each type is emitted
and what the guarantees are.

The producer is librdkafka's (confluent-kafka): a result may cause several events, and
kafka-python's producer spent about 30 us of CPU per message here against about 3 us
(docs/benchmarks.md, "Rank events"), which at 20,000 results/s was most of a core.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Protocol

import orjson
from confluent_kafka import KafkaError, KafkaException, Message, Producer

logger = logging.getLogger(__name__)
LIBRDKAFKA_LOGGER = logging.getLogger("kafka.librdkafka")


class RankEventType(StrEnum):
    PERSONAL_BEST = "personal_best"
    RANK_CHANGED = "rank_changed"
    ENTERED_TOP = "entered_top"
    LEFT_TOP = "left_top"
    OVERTAKEN = "overtaken"
    SEASON_FINAL = "season_final"


def topic_tag(topic: str) -> str:
    """8 hex digits of the topic name's SHA-1: in a match result's event ids, so the offsets of
    a renamed topic (which start again at 0) never give an id already used."""
    return hashlib.sha1(topic.encode(), usedforsecurity=False).hexdigest()[:8]


def rank_event_id(cause: str, kind: str, player_id: int) -> str:
    """The event's id: "<cause>:<type>:<player id>".

    ``cause`` names what caused it, the same on every redelivery and replay: a match result
    "<topic tag>:<board id>:<partition>:<offset>" (built by the apply script), a correction
    "<void|ban|unban>:<its id>:<board id>", a close-out "final:<board id>". Built rather than
    hashed: in the apply script a hash per event cost a third of the event (docs/events.md).
    """
    return f"{cause}:{kind}:{int(player_id)}"


def match_result_cause(*, topic: str, board_id: int, partition: int, offset: int) -> str:
    """The cause part of the ids of a match result's events (as the apply scripts build it)."""
    return f"{topic_tag(topic)}:{int(board_id)}:{int(partition)}:{int(offset)}"


def rfc3339(moment: datetime) -> str:
    """``at`` as the apply scripts write it: UTC, whole seconds, "Z"."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class RankEvent:
    """One event built in Python (corrections, close-out)."""

    event_id: str
    type: str
    season_id: int
    board: str
    player_id: int
    rank: int | None
    previous_rank: int | None
    points: int | None
    previous_points: int | None
    match_id: str | None
    other_player_id: int | None
    at: datetime
    reward: dict[str, Any] | None = None  # season_final: {"name", "quantity"} or None

    @property
    def key(self) -> bytes:
        return str(self.player_id).encode()

    @property
    def value(self) -> bytes:
        body: dict[str, Any] = {
            "eventId": self.event_id,
            "type": self.type,
            "seasonId": self.season_id,
            "board": self.board,
            "playerId": self.player_id,
            "rank": self.rank,
            "previousRank": self.previous_rank,
            "points": self.points,
            "previousPoints": self.previous_points,
            "matchId": self.match_id,
            "otherPlayerId": self.other_player_id,
            "at": rfc3339(self.at),
        }
        if self.type == RankEventType.SEASON_FINAL:
            body["reward"] = self.reward
        return orjson.dumps(body)


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    """One entry of a board's outbox stream: the events one call wrote (docs/events.md)."""

    outbox: str  # the stream's key
    entry_id: str  # its stream id, "<ms>-<seq>"
    payload: bytes  # the events, in the scripts' compact form (outbox_messages)

    @property
    def order(self) -> tuple[str, int, int]:
        ms, _, seq = self.entry_id.partition("-")
        return (self.outbox, int(ms), int(seq or 0))


def outbox_entries_merge(*groups: Sequence[OutboxEntry]) -> list[OutboxEntry]:
    """The entries of ``groups`` once each, in each outbox's stream order."""
    unique = {(e.outbox, e.entry_id): e for group in groups for e in group}
    return sorted(unique.values(), key=lambda e: e.order)


_CODES = {
    b"P": RankEventType.PERSONAL_BEST,
    b"R": RankEventType.RANK_CHANGED,
    b"O": RankEventType.OVERTAKEN,
    b"T": RankEventType.ENTERED_TOP,
    b"L": RankEventType.LEFT_TOP,
}


def _templates(season: bytes, slug: bytes, prefix: bytes, match: bytes) -> dict[bytes, bytes]:
    """Per outbox code, the event's JSON with %b for: cause, player (id), player, rank,
    previousRank, points, previousPoints, (matchId, if ``match`` has its %b,) otherPlayerId,
    at. The board's parts are the entry's."""
    season_part, slug_part, prefix_part = (
        part.replace(b"%", b"%%") for part in (season, orjson.dumps(slug.decode()), prefix)
    )
    return {
        code: b'{"eventId":"'
        + prefix_part
        + b"%b:"
        + kind.encode()
        + b':%b","type":"'
        + kind.encode()
        + b'","seasonId":'
        + season_part
        + b',"board":'
        + slug_part
        + b',"playerId":%b,"rank":%b,"previousRank":%b,"points":%b,"previousPoints":%b,'
        b'"matchId":' + match + b',"otherPlayerId":%b,"at":"%b"}'
        for code, kind in _CODES.items()
    }


def _at(token: bytes) -> bytes:
    return rfc3339(datetime.fromtimestamp(int(token), UTC)).encode()


_RECORD = 10  # tokens per record of an outbox entry (leaderboard/lua/common.lua)


def outbox_messages(payload: bytes) -> list[tuple[bytes, bytes]]:
    """An outbox entry as the (key, value) Kafka messages of its events, in order.

    The entry is the scripts' compact form (leaderboard/lua/common.lua, "E1 ..."): records of
    ten tokens, one per event or per result's step (its personal_best, and its rank_changed
    when the ranks differ). The JSON is made here from per-type templates, with no object per
    event: made in Lua it was a third of the apply script's cost. An entry of the former form
    (one "<player id> <JSON>" line per event) is read as it is.
    """
    if not payload.startswith(b"E1 "):
        messages = []
        for line in payload.split(b"\n"):
            key, _, value = line.partition(b" ")
            messages.append((key, value))
        return messages
    tokens = payload.split(b" ")
    _, season, slug, prefix = tokens[:4]
    body = iter(tokens[4:])
    if (len(tokens) - 4) % _RECORD:
        raise ValueError(f"outbox entry of {len(tokens) - 4} tokens after its header")
    board = (season, slug, b"" if prefix == b"-" else prefix)
    templates = _templates(*board, b'"%b"')
    unknown = _templates(*board, b"null")  # the events of a cause without a match id
    personal_best, rank_changed = templates[b"P"], templates[b"R"]
    times: dict[bytes, bytes] = {}
    out: list[tuple[bytes, bytes]] = []
    append = out.append
    for code, cause, match, seconds, player, rank, previous, points, previous_points, other in zip(
        *[body] * _RECORD, strict=True
    ):
        at = times.get(seconds)
        if at is None:
            at = times[seconds] = _at(seconds)
        if match == b"-":
            args: tuple[bytes, ...] = (
                cause,
                player,
                player,
                rank,
                previous,
                points,
                previous_points,
                other,
                at,
            )
            if code == b"S":
                append((player, unknown[b"P"] % args))
                if rank != previous:
                    append((player, unknown[b"R"] % args))
            else:
                append((player, unknown[code] % args))
            continue
        args = (cause, player, player, rank, previous, points, previous_points, match, other, at)
        if code == b"S":
            append((player, personal_best % args))
            if rank != previous:
                append((player, rank_changed % args))
        else:
            append((player, templates[code] % args))
    return out


class RankEventSink(Protocol):
    def publish(self, *, messages: Sequence[tuple[bytes, bytes]]) -> None:
        """Send every (key, value) to the rank-events topic; return once the broker has them
        all (raise otherwise: the caller sends them again, same ids)."""


class RankEventsNotDelivered(Exception):
    """Kafka did not acknowledge every rank event (the batch is published again)."""


class KafkaRankEventSink:
    """``RankEventSink`` on a Kafka topic, through librdkafka.

    acks=all with the idempotent producer, as the match results' producer: an event
    acknowledged here survives a broker failover. The murmur2 partitioner is the Java client's
    (and kafka-python's), so a player's events land on the partition any client would pick.
    """

    def __init__(
        self,
        *,
        bootstrap_servers: Sequence[str],
        topic: str,
        client_id: str = "rank-events",
        # Kafka away: a publish fails after this long, so the caller's retrying says what it
        # waits for (and sends again, same ids) instead of hanging silent.
        timeout_seconds: float = 10.0,
    ) -> None:
        self.topic = topic
        self._timeout = timeout_seconds
        self._producer = Producer(
            {
                "bootstrap.servers": ",".join(bootstrap_servers),
                "client.id": client_id,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
                # Delivery reports for failures only: a Python callback per acknowledged
                # message was a seventh of the producer's CPU per event.
                "delivery.report.only.error": True,
                "on_delivery": self._delivered,
                "partitioner": "murmur2_random",
                # A broker that went away is tried again this often at least.
                "reconnect.backoff.max.ms": 1000,
                "message.timeout.ms": int(timeout_seconds * 1000),
                # librdkafka's own lines through logging, as kafka-python's (the "kafka" logger:
                # KAFKA_LOG_LEVEL, repeats folded by KAFKA_LOG_REPEAT_SECONDS).
                "logger": LIBRDKAFKA_LOGGER,
            }
        )
        self._lock = threading.Lock()
        self._failures: list[KafkaError] = []

    def _delivered(self, error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            self._failures.append(error)

    def publish(self, *, messages: Sequence[tuple[bytes, bytes]]) -> None:
        if not messages:
            return
        with self._lock:
            failures: list[KafkaError] = []
            self._failures = failures
            produce = self._producer.produce
            topic = self.topic
            for key, value in messages:
                while True:
                    try:
                        produce(topic, value, key)
                        break
                    except BufferError:
                        # The local queue is full: let deliveries drain it.
                        self._producer.poll(0.05)
            remaining = self._producer.flush(self._timeout)
        if remaining or failures:
            reason = failures[0] if failures else f"{remaining} not acknowledged in time"
            raise RankEventsNotDelivered(
                f"{len(failures) or remaining} of {len(messages)} rank events not delivered to "
                f"{self.topic}: {reason}"
            )

    def close(self) -> None:
        try:
            self._producer.flush(5)
        except KafkaException as exc:
            logger.warning("rank events producer: flush at close failed: %s", exc)


_sinks: dict[tuple[tuple[str, ...], str], KafkaRankEventSink] = {}
_sinks_lock = threading.Lock()


def rank_event_sink() -> KafkaRankEventSink:
    """The process's producer of rank events on KAFKA_BOOTSTRAP_SERVERS and
    KAFKA_RANK_EVENTS_TOPIC, as the settings say when asked (tests change them)."""
    from django.conf import settings

    wanted = (tuple(settings.KAFKA_BOOTSTRAP_SERVERS), str(settings.KAFKA_RANK_EVENTS_TOPIC))
    with _sinks_lock:
        sink = _sinks.get(wanted)
        if sink is None:
            sink = _sinks[wanted] = KafkaRankEventSink(bootstrap_servers=wanted[0], topic=wanted[1])
        return sink
