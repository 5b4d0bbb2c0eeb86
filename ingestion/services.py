"""Writes on ingestion: the batch handler behind the Kafka consumer, and the HTTP door's.

``match_results_ingest`` takes one polled batch (any number of partitions) through four steps:
decode and validate, dead-letter what is invalid, store the rest in PostgreSQL in one
statement, and apply what must count to the boards in one pipelined Redis round trip. It is
idempotent: running it again on the same records (a retry, or a redelivery after a crash) adds
nothing twice. docs/ingestion.md explains why.
"""

from __future__ import annotations

import logging
import os
import secrets
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import NamedTuple, Protocol, TypeVar

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from kafka.errors import KafkaError

from leaderboard import keys
from leaderboard.codec import ScoreCodec
from leaderboard.models import MatchResult, PlayerBan
from leaderboard.redis import get_board_redis
from leaderboard.services import CountedResult, board_results_apply
from seasons.models import Season

from .models import GameServerToken
from .producer import MatchResultProducer
from .schema import (
    UNEXPECTED,
    MatchResultMessage,
    MessageRejected,
    message_check_not_future,
    message_check_season,
    message_decode,
    message_validate,
)
from .selectors import game_server_token_digest
from .stats import BatchOutcome

logger = logging.getLogger(__name__)

T = TypeVar("T")


# The per-result values of the hot path are typed NamedTuples, not frozen dataclasses: as
# immutable, and about three times cheaper to build (a frozen dataclass sets each field through
# object.__setattr__), which counts at 20,000 results a second.


class ConsumedRecord(NamedTuple):
    """One Kafka record as the handler needs it (kept free of kafka-python types)."""

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


class DeadLetterSink(Protocol):
    def publish(self, *, letters: Sequence[DeadLetter]) -> None:
        """Send every letter and wait until the broker has them all."""


class Retrying(Protocol):
    def __call__(self, what: str, operation: Callable[[], T]) -> T:
        """Run ``operation``; while ``what`` is unreachable, wait and run it again."""


def _once(what: str, operation: Callable[[], T]) -> T:
    return operation()


def _latest_achieved_at() -> datetime:
    """The latest achievedAt accepted now: later is ``achieved_in_future`` (both entrances)."""
    return timezone.now() + timedelta(seconds=settings.INGEST_MAX_FUTURE_SKEW_SECONDS)


# --- 1. decode and validate ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DecodedBatch:
    valid: list[ValidResult]
    dead_letters: list[DeadLetter]
    seasons: dict[int, Season]


def match_results_decode(*, records: Sequence[ConsumedRecord]) -> DecodedBatch:
    """Validate every record; one season query per batch (statuses change: no cache)."""
    parsed: list[tuple[ConsumedRecord, MatchResultMessage]] = []
    letters: list[DeadLetter] = []
    for record in records:
        try:
            parsed.append((record, message_decode(record.value)))
        except MessageRejected as exc:
            letters.append(DeadLetter(record, exc.code, exc.reason))
        except Exception as exc:
            # Untrusted bytes met a case the checks do not foresee: one message must never
            # stop the consumer, so it goes to the dead-letter topic and the bug to the log.
            logger.exception("unexpected error validating offset %d", record.offset)
            letters.append(DeadLetter(record, UNEXPECTED, f"{type(exc).__name__}: {exc}"))
    seasons = Season.objects.in_bulk({message.season_id for _, message in parsed})
    not_after = _latest_achieved_at()
    valid: list[ValidResult] = []
    for record, message in parsed:
        try:
            message_check_season(message, seasons.get(message.season_id))
            message_check_not_future(message, not_after=not_after)
        except MessageRejected as exc:
            letters.append(DeadLetter(record, exc.code, exc.reason))
            continue
        except Exception as exc:
            logger.exception("unexpected error checking offset %d", record.offset)
            letters.append(DeadLetter(record, UNEXPECTED, f"{type(exc).__name__}: {exc}"))
            continue
        valid.append(ValidResult(record.partition, record.offset, message))
    return DecodedBatch(valid, letters, seasons)


# --- 2. store ------------------------------------------------------------------------------


class StoredResult(NamedTuple):
    """A valid result after the insert: new, or found already stored."""

    result: ValidResult
    xid: int | None  # the inserting transaction (None: legacy rows stored without it)
    # True when the stored row came from this very message (same partition and offset): it
    # was inserted now, or earlier and then the process died before it reached the boards.
    from_this_message: bool
    # Voided, or the player is banned from the season: stored, but not counted.
    excluded: bool


_TABLE = MatchResult._meta.db_table
_BANS = PlayerBan._meta.db_table
_SEASONS = Season._meta.db_table

# The season foreign key is not checked per row (ingestion/migrations/0006): this lock, taken
# once per batch and held to the commit, is the one that check took. A season being deleted
# waits for the batch, and then its trigger sees the batch's rows and refuses. Ordered, so
# that two consumers lock in the same order.
_LOCK_SEASONS_SQL = f"SELECT id FROM {_SEASONS} WHERE id = ANY(%s) ORDER BY id FOR KEY SHARE"  # noqa: S608

# The batch goes in by COPY into a per-connection temp table, then one INSERT ... SELECT with
# conflicts ignored: measured about twice as fast as one INSERT over unnest(<arrays>), whose
# per-element array adaptation dominates (docs/ingestion.md). pg_current_xact_id records the
# transaction for rebuilds running meanwhile.
_STAGE = "ingest_match_result_stage"
_STAGE_SQL = f"""
    CREATE TEMP TABLE IF NOT EXISTS {_STAGE} (
        match_id uuid, player_id bigint, season_id integer, points bigint,
        achieved_at timestamptz, kafka_partition integer, kafka_offset bigint
    ) ON COMMIT DELETE ROWS
"""
_COPY_SQL = f"COPY {_STAGE} FROM STDIN"
_INSERT_SQL = f"""
    INSERT INTO {_TABLE} (match_id, player_id, season_id, points, achieved_at, ingested_at,
                          void_reason, kafka_partition, kafka_offset, ingest_xid)
    SELECT s.match_id, s.player_id, s.season_id, s.points, s.achieved_at, now(), '',
           s.kafka_partition, s.kafka_offset, pg_current_xact_id()::text::bigint
    FROM {_STAGE} s
    ON CONFLICT (match_id, player_id) DO NOTHING
    RETURNING kafka_partition, kafka_offset, ingest_xid, EXISTS (
        SELECT 1 FROM {_BANS} b
        WHERE b.season_id = {_TABLE}.season_id AND b.player_id = {_TABLE}.player_id
    )
"""  # noqa: S608 -- table names are constants, every value comes in by COPY

_EXISTING_SQL = f"""
    SELECT r.match_id, r.player_id, r.kafka_partition, r.kafka_offset, r.ingest_xid,
           r.voided_at IS NOT NULL OR EXISTS (
               SELECT 1 FROM {_BANS} b
               WHERE b.season_id = r.season_id AND b.player_id = r.player_id
           )
    FROM {_TABLE} r
    JOIN unnest(%s::uuid[], %s::bigint[]) AS t(match_id, player_id)
      ON r.match_id = t.match_id AND r.player_id = t.player_id
"""  # noqa: S608


# kafka_partition, kafka_offset, ingest_xid, excluded (voided or banned) of a stored row.
_StoredRow = tuple[int | None, int | None, int | None, bool]


class SeasonsDeleted(Exception):
    """Seasons of the batch were deleted after it was validated; nothing was stored."""

    def __init__(self, season_ids: set[int]) -> None:
        super().__init__(f"season(s) {sorted(season_ids)} deleted while storing their results")
        self.season_ids = season_ids


def match_results_store(*, results: Sequence[ValidResult]) -> list[StoredResult]:
    """Insert the batch (conflicts on (match_id, player_id) ignored) and classify each result.

    Raises SeasonsDeleted, storing nothing, if a season of the batch no longer exists.
    """
    if not results:
        return []
    with transaction.atomic(), connection.cursor() as cursor:
        season_ids = {r.message.season_id for r in results}
        cursor.execute(_LOCK_SEASONS_SQL, [sorted(season_ids)])
        gone = season_ids - {row[0] for row in cursor.fetchall()}
        if gone:
            raise SeasonsDeleted(gone)
        cursor.execute(_STAGE_SQL)
        with cursor.cursor.copy(_COPY_SQL) as copy:
            for r in results:
                m = r.message
                values = (m.match_id, m.player_id, m.season_id, m.points, m.achieved_at)
                copy.write_row((*values, r.partition, r.offset))
        cursor.execute(_INSERT_SQL)
        # Inserted now, keyed by the message that won the row (a Kafka record is one result,
        # so its partition and offset name it; cheaper to match on than the uuid pair).
        inserted: dict[tuple[int, int], tuple[int | None, bool]] = {
            (row[0], row[1]): (row[2], bool(row[3])) for row in cursor.fetchall()
        }
        # The rest conflicted: stored before, or by another message of this batch carrying the
        # same result. The stored row says which message it came from.
        missing = {
            (r.message.match_id, r.message.player_id)
            for r in results
            if (r.partition, r.offset) not in inserted
        }
        existing: dict[tuple[uuid.UUID, int], _StoredRow] = {}
        if missing:
            cursor.execute(
                _EXISTING_SQL,
                [[match for match, _ in missing], [player for _, player in missing]],
            )
            existing = {(row[0], row[1]): (row[2], row[3], row[4], row[5]) for row in cursor}
    stored: list[StoredResult] = []
    for r in results:
        new = inserted.get((r.partition, r.offset))
        if new is not None:
            xid, banned = new
            stored.append(StoredResult(r, xid, True, banned))
            continue
        # Absent only if deleted in between; treat it as not ours to count.
        partition, offset, xid, excluded = existing.get(
            (r.message.match_id, r.message.player_id), (None, None, None, True)
        )
        same_message = (partition, offset) == (r.partition, r.offset)
        stored.append(StoredResult(r, xid, same_message, excluded))
    return stored


# --- 3. apply ------------------------------------------------------------------------------


def applied_offsets_get(*, topic: str, partitions: Sequence[int]) -> dict[int, int]:
    """Each partition's highest offset already on the boards (-1: none)."""
    raw = get_board_redis().hmget(keys.ingest_applied_offsets(topic=topic), list(partitions))
    return {p: -1 if v is None else int(v) for p, v in zip(partitions, raw, strict=True)}


def _counted(
    stored: Sequence[StoredResult],
    *,
    applied_offsets: Mapping[int, int],
    seasons: Mapping[int, Season],
) -> tuple[list[CountedResult], int, int]:
    """(results to put on the boards, duplicates, excluded) per the exactly-once rule.

    A result counts iff it was stored by this very message (now, or before a crash) and its
    offset is above the partition's applied watermark, i.e. it never reached the boards.
    """
    codecs: dict[int, ScoreCodec] = {}
    counted: list[CountedResult] = []
    duplicates = excluded = 0
    for s in stored:
        r = s.result
        m = r.message
        if not s.from_this_message or r.offset <= applied_offsets[r.partition]:
            duplicates += 1
            continue
        if s.excluded or s.xid is None:
            excluded += 1
            continue
        season = seasons[m.season_id]
        codec = codecs.get(m.season_id)
        if codec is None:
            codec = codecs[m.season_id] = season.codec
        counted.append(
            CountedResult(
                partition=r.partition,
                offset=r.offset,
                season_id=m.season_id,
                player_id=m.player_id,
                points=m.points,
                ticks=codec.ticks(m.achieved_at - season.starts_at),
                day=m.achieved_at.astimezone(UTC).date(),
                xid=s.xid,
            )
        )
    return counted, duplicates, excluded


# --- the batch -----------------------------------------------------------------------------


def match_results_ingest(
    *,
    topic: str,
    records: Sequence[ConsumedRecord],
    dead_letters: DeadLetterSink,
    retrying: Retrying = _once,
) -> BatchOutcome:
    """Handle one polled batch; when it returns, both sinks hold it and offsets may be committed.

    ``retrying`` wraps each step that talks to a dependency, so a dependency that goes away
    makes the step wait and run again (each step is safe to repeat).
    """
    if not records:
        return BatchOutcome(0, 0, 0, 0, 0)
    handled: dict[int, int] = {}
    for record in records:
        handled[record.partition] = max(handled.get(record.partition, -1), record.offset)

    while True:
        decoded = retrying("PostgreSQL", lambda: match_results_decode(records=records))
        try:
            stored = retrying("PostgreSQL", partial(match_results_store, results=decoded.valid))
            break
        except SeasonsDeleted as exc:
            # Staff deleted a season that had no results yet: validating again turns its
            # results into dead letters (unknown season).
            logger.warning("%s; validating the batch again", exc)
    if decoded.dead_letters:
        retrying("Kafka", lambda: dead_letters.publish(letters=decoded.dead_letters))

    def apply() -> tuple[int, int, int]:
        applied_offsets = applied_offsets_get(topic=topic, partitions=sorted(handled))
        counted, duplicates, excluded = _counted(
            stored, applied_offsets=applied_offsets, seasons=decoded.seasons
        )
        if not counted:
            return 0, duplicates, excluded
        outcome = board_results_apply(
            topic=topic, results=counted, handled_offsets=handled, seasons=decoded.seasons
        )
        # An overflowing cumulative sum is logged by board_results_apply; the result stays
        # stored and counted as applied here (the rebuild reports it too).
        return outcome.applied, duplicates + outcome.already_applied, excluded

    applied, duplicates, excluded = retrying("Redis", apply)
    return BatchOutcome(
        records=len(records),
        applied=applied,
        duplicates=duplicates,
        dead_letters=len(decoded.dead_letters),
        not_counted=excluded,
    )


def dead_letter_headers(*, letter: DeadLetter, topic: str) -> list[tuple[str, bytes]]:
    """Headers of a dead letter: why it was rejected, and where it came from."""
    return [
        ("dlq.code", letter.code.encode()),
        ("dlq.reason", letter.reason.encode()),
        ("dlq.source.topic", topic.encode()),
        ("dlq.source.partition", str(letter.record.partition).encode()),
        ("dlq.source.offset", str(letter.record.offset).encode()),
        ("dlq.rejected_at", datetime.now(UTC).isoformat().encode()),
    ]


# --- Game-server tokens (the HTTP door) ----------------------------------------------------------

GAME_SERVER_TOKEN_MARKER = "lbgs_"  # noqa: S105 -- a recognisable prefix, not a secret
# How stale last_used_at may get: writing it on every request would add a row update per post.
GAME_SERVER_TOKEN_TOUCH_SECONDS = 60


@transaction.atomic
def game_server_token_create(*, name: str) -> tuple[GameServerToken, str]:
    """Create a token for a game server; the raw token is returned once and never stored."""
    raw_token = GAME_SERVER_TOKEN_MARKER + secrets.token_urlsafe(32)
    token = GameServerToken(
        name=name,
        token_prefix=raw_token[: GameServerToken._meta.get_field("token_prefix").max_length],
        token_digest=game_server_token_digest(raw_token=raw_token),
    )
    token.full_clean()
    token.save(force_insert=True)
    return token, raw_token


def game_server_tokens_deactivate(*, token_ids: Iterable[int]) -> int:
    return GameServerToken.objects.filter(id__in=list(token_ids), is_active=True).update(
        is_active=False
    )


def game_server_token_touch(*, token: GameServerToken) -> None:
    """Record a use, at most once a minute per token."""
    now = timezone.now()
    last = token.last_used_at
    if last is not None and (now - last).total_seconds() < GAME_SERVER_TOKEN_TOUCH_SECONDS:
        return
    GameServerToken.objects.filter(id=token.id).update(last_used_at=now)
    token.last_used_at = now


# --- The HTTP door: validate a batch, publish it all or nothing ----------------------------------

# One POST carries at most this many results: bounded request time and memory per worker.
HTTP_MAX_RESULTS_PER_REQUEST = 1000


@dataclass(frozen=True, slots=True)
class RejectedItem:
    index: int
    code: str
    reason: str
    field: str | None


class MatchResultsRejected(Exception):
    """At least one item is invalid; nothing was published."""

    def __init__(self, rejected: list[RejectedItem]) -> None:
        super().__init__(f"{len(rejected)} invalid result(s)")
        self.rejected = rejected


class MatchResultsUnpublished(Exception):
    """Kafka did not acknowledge the batch; the caller may retry it whole (duplicates are fine)."""


_http_producers: dict[tuple[int, tuple[str, ...]], MatchResultProducer] = {}


def _http_producer() -> MatchResultProducer:
    # One producer per process (and per fork: a producer's I/O thread does not survive fork).
    key = (os.getpid(), tuple(settings.KAFKA_BOOTSTRAP_SERVERS))
    producer = _http_producers.get(key)
    if producer is None:
        producer = _http_producers[key] = MatchResultProducer.from_settings(
            client_id="http-door",
            linger_ms=2,
            # Fail an HTTP request in seconds rather than hold a web worker for a minute.
            max_block_ms=5_000,
            bootstrap_timeout_ms=5_000,
            request_timeout_ms=5_000,
            delivery_timeout_ms=10_000,
        )
    return producer


def match_results_submit(*, items: Sequence[object]) -> int:
    """Validate every item exactly as the consumer does, then publish them all to the topic.

    All or nothing: one invalid item rejects the request (``MatchResultsRejected`` lists each
    bad item's index and reason) and nothing is published. Returns the count acknowledged by
    Kafka; raises ``MatchResultsUnpublished`` when Kafka does not acknowledge in time.
    """
    messages: list[tuple[int, MatchResultMessage]] = []
    rejected: list[RejectedItem] = []
    for index, item in enumerate(items):
        try:
            messages.append((index, message_validate(item)))
        except MessageRejected as exc:
            rejected.append(RejectedItem(index, exc.code, exc.reason, exc.field))
    seasons = Season.objects.in_bulk({message.season_id for _, message in messages})
    not_after = _latest_achieved_at()
    for index, message in messages:
        try:
            message_check_season(message, seasons.get(message.season_id))
            message_check_not_future(message, not_after=not_after)
        except MessageRejected as exc:
            rejected.append(RejectedItem(index, exc.code, exc.reason, exc.field))
    if rejected:
        raise MatchResultsRejected(sorted(rejected, key=lambda item: item.index))
    try:
        return _http_producer().send_many(
            [message for _, message in messages],
            topic=settings.KAFKA_MATCH_RESULTS_TOPIC,
            timeout=10,
        )
    except KafkaError as exc:
        raise MatchResultsUnpublished(f"Kafka did not acknowledge the results: {exc}") from exc
