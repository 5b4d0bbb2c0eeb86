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

from leaderboard.board_scores import LatestResults, latest_results_get
from leaderboard.models import Board, MatchResult, PlayerBan, ScoringRule
from leaderboard.selectors import BoardRef, boards_of_seasons
from leaderboard.services import CountedResult, applied_offsets_get, board_results_apply
from seasons.models import Season

from .models import GameServerToken
from .producer import MatchResultProducer
from .schema import (
    UNEXPECTED,
    MatchResultMessage,
    MessageRejected,
    message_check_board,
    message_check_not_future,
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
    board_id: int


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
    boards: dict[int, BoardRef]


def _boards_check(
    messages: Sequence[tuple[int, MatchResultMessage]],
) -> tuple[dict[int, BoardRef], list[tuple[int, int]], list[tuple[int, MessageRejected]]]:
    """Check each (index, message) against its season and board, one query for the lot
    (statuses change: no cache). Returns the boards, (index, board id) of the valid ones and
    (index, rejection) of the others."""
    seasons = Season.objects.in_bulk({message.season_id for _, message in messages})
    boards = boards_of_seasons(season_ids=set(seasons))
    not_after = _latest_achieved_at()
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


def match_results_decode(*, records: Sequence[ConsumedRecord]) -> DecodedBatch:
    """Validate every record; one season and board query per batch."""
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
    boards, checked, rejected = _boards_check(list(enumerate(m for _, m in parsed)))
    for index, rejection in rejected:
        letters.append(DeadLetter(parsed[index][0], rejection.code, rejection.reason))
    valid = [
        ValidResult(parsed[index][0].partition, parsed[index][0].offset, parsed[index][1], board_id)
        for index, board_id in checked
    ]
    return DecodedBatch(valid, letters, boards)


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
_BOARDS = Board._meta.db_table

# The season and board foreign keys are not checked per row (ingestion migration 0006,
# leaderboard migration 0005): this lock, taken once per batch and held to the commit, is the
# one those checks took. A season or board being deleted waits for the batch, and then its
# trigger sees the batch's rows and refuses. Ordered, so two consumers lock in the same order.
_LOCK_BOARDS_SQL = f"""
    SELECT b.id FROM {_BOARDS} b JOIN {_SEASONS} s ON s.id = b.season_id
    WHERE b.id = ANY(%s) ORDER BY b.id FOR KEY SHARE OF b, s
"""  # noqa: S608

# The batch goes in by COPY into a per-connection temp table, then one INSERT ... SELECT with
# conflicts ignored: measured about twice as fast as one INSERT over unnest(<arrays>), whose
# per-element array adaptation dominates (docs/ingestion.md). pg_current_xact_id records the
# transaction for rebuilds running meanwhile.
_STAGE = "ingest_match_result_stage"
_STAGE_SQL = f"""
    CREATE TEMP TABLE IF NOT EXISTS {_STAGE} (
        match_id uuid, player_id bigint, season_id integer, board_id bigint, points bigint,
        achieved_at timestamptz, kafka_partition integer, kafka_offset bigint
    ) ON COMMIT DELETE ROWS
"""
_COPY_SQL = f"COPY {_STAGE} FROM STDIN"
_INSERT_SQL = f"""
    INSERT INTO {_TABLE} (match_id, player_id, season_id, board_id, points, achieved_at,
                          ingested_at, void_reason, kafka_partition, kafka_offset, ingest_xid)
    SELECT s.match_id, s.player_id, s.season_id, s.board_id, s.points, s.achieved_at, now(), '',
           s.kafka_partition, s.kafka_offset, pg_current_xact_id()::text::bigint
    FROM {_STAGE} s
    ON CONFLICT (match_id, player_id, board_id) DO NOTHING
    RETURNING kafka_partition, kafka_offset, ingest_xid, EXISTS (
        SELECT 1 FROM {_BANS} b
        WHERE b.season_id = {_TABLE}.season_id AND b.player_id = {_TABLE}.player_id
    )
"""  # noqa: S608 -- table names are constants, every value comes in by COPY

_EXISTING_SQL = f"""
    SELECT r.match_id, r.player_id, r.board_id, r.kafka_partition, r.kafka_offset, r.ingest_xid,
           r.voided_at IS NOT NULL OR EXISTS (
               SELECT 1 FROM {_BANS} b
               WHERE b.season_id = r.season_id AND b.player_id = r.player_id
           )
    FROM {_TABLE} r
    JOIN unnest(%s::uuid[], %s::bigint[], %s::bigint[]) AS t(match_id, player_id, board_id)
      ON r.match_id = t.match_id AND r.player_id = t.player_id AND r.board_id = t.board_id
"""  # noqa: S608


# kafka_partition, kafka_offset, ingest_xid, excluded (voided or banned) of a stored row.
_StoredRow = tuple[int | None, int | None, int | None, bool]


class BoardsDeleted(Exception):
    """Boards (or seasons) of the batch were deleted after it was validated; nothing stored."""

    def __init__(self, board_ids: set[int]) -> None:
        super().__init__(f"board(s) {sorted(board_ids)} deleted while storing their results")
        self.board_ids = board_ids


def match_results_store(*, results: Sequence[ValidResult]) -> list[StoredResult]:
    """Insert the batch (conflicts on (match_id, player_id, board) ignored) and classify each.

    Raises BoardsDeleted, storing nothing, if a board of the batch no longer exists.
    """
    if not results:
        return []
    with transaction.atomic(), connection.cursor() as cursor:
        board_ids = {r.board_id for r in results}
        cursor.execute(_LOCK_BOARDS_SQL, [sorted(board_ids)])
        gone = board_ids - {row[0] for row in cursor.fetchall()}
        if gone:
            raise BoardsDeleted(gone)
        cursor.execute(_STAGE_SQL)
        with cursor.cursor.copy(_COPY_SQL) as copy:
            for r in results:
                m = r.message
                values = (m.match_id, m.player_id, m.season_id, r.board_id, m.points)
                copy.write_row((*values, m.achieved_at, r.partition, r.offset))
        cursor.execute(_INSERT_SQL)
        # Inserted now, keyed by the message that won the row (a Kafka record is one result,
        # so its partition and offset name it; cheaper to match on than the uuid pair).
        inserted: dict[tuple[int, int], tuple[int | None, bool]] = {
            (row[0], row[1]): (row[2], bool(row[3])) for row in cursor.fetchall()
        }
        # The rest conflicted: stored before, or by another message of this batch carrying the
        # same result. The stored row says which message it came from.
        missing = {
            (r.message.match_id, r.message.player_id, r.board_id)
            for r in results
            if (r.partition, r.offset) not in inserted
        }
        existing: dict[tuple[uuid.UUID, int, int], _StoredRow] = {}
        if missing:
            cursor.execute(
                _EXISTING_SQL,
                [list(column) for column in zip(*missing, strict=True)],
            )
            existing = {
                (row[0], row[1], row[2]): (row[3], row[4], row[5], row[6]) for row in cursor
            }
    stored: list[StoredResult] = []
    for r in results:
        new = inserted.get((r.partition, r.offset))
        if new is not None:
            xid, banned = new
            stored.append(StoredResult(r, xid, True, banned))
            continue
        # Absent only if deleted in between; treat it as not ours to count.
        partition, offset, xid, excluded = existing.get(
            (r.message.match_id, r.message.player_id, r.board_id), (None, None, None, True)
        )
        same_message = (partition, offset) == (r.partition, r.offset)
        stored.append(StoredResult(r, xid, same_message, excluded))
    return stored


# --- 3. apply ------------------------------------------------------------------------------


def _counted(
    stored: Sequence[StoredResult],
    *,
    applied_offsets: Mapping[tuple[int, int], int],
    boards: Mapping[int, BoardRef],
    latest: LatestResults,
) -> tuple[list[CountedResult], int, int]:
    """(results to put on the boards, duplicates, excluded) per the exactly-once rule.

    A result counts iff it was stored by this very message (now, or before a crash) and its
    offset is above its board's applied watermark for the partition, i.e. it never reached the
    board. Under the latest rule it then counts only where PostgreSQL holds it as the player's
    latest result (season-long, and of its day): an older result delivered later changes
    nothing, whatever the order of delivery.
    """
    counted: list[CountedResult] = []
    duplicates = excluded = 0
    for s in stored:
        r = s.result
        m = r.message
        if not s.from_this_message or r.offset <= applied_offsets[(r.board_id, r.partition)]:
            duplicates += 1
            continue
        if s.excluded or s.xid is None:
            excluded += 1
            continue
        board = boards[r.board_id]
        day = m.achieved_at.astimezone(UTC).date()
        season_long = daily = True
        if board.rule == ScoringRule.LATEST:
            season_long = latest.season_long.get((board.id, m.player_id)) == m.match_id
            daily = latest.daily.get((board.id, m.player_id, day)) == m.match_id
            if not (season_long or daily):
                # Stored, but a later result of the player holds the board: not counted.
                excluded += 1
                continue
        counted.append(
            CountedResult(
                partition=r.partition,
                offset=r.offset,
                board_id=board.id,
                player_id=m.player_id,
                points=m.points,
                ticks=board.codec.ticks(m.achieved_at - board.season.starts_at),
                day=day,
                xid=s.xid,
                season_long=season_long,
                daily=daily,
            )
        )
    return counted, duplicates, excluded


def _latest_of(stored: Sequence[StoredResult], boards: Mapping[int, BoardRef]) -> LatestResults:
    """PostgreSQL's latest result of each (latest-rule board, player) and (.., day) in the batch."""
    candidates = {
        (s.result.board_id, s.result.message.player_id, s.result.message.achieved_at)
        for s in stored
        if s.from_this_message and boards[s.result.board_id].rule == ScoringRule.LATEST
    }
    if not candidates:
        return LatestResults({}, {})
    return latest_results_get(candidates=candidates)


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
        except BoardsDeleted as exc:
            # Staff deleted a season or board that had no results yet: validating again turns
            # its results into dead letters (unknown season or board).
            logger.warning("%s; validating the batch again", exc)
    if decoded.dead_letters:
        retrying("Kafka", lambda: dead_letters.publish(letters=decoded.dead_letters))
    # Read after the batch committed: it decides which results hold a latest-rule board.
    latest = retrying("PostgreSQL", lambda: _latest_of(stored, decoded.boards))
    board_ids = sorted({s.result.board_id for s in stored})

    def apply() -> tuple[int, int, int]:
        applied_offsets = applied_offsets_get(
            topic=topic, partitions=sorted(handled), board_ids=board_ids
        )
        counted, duplicates, excluded = _counted(
            stored, applied_offsets=applied_offsets, boards=decoded.boards, latest=latest
        )
        if not counted:
            return 0, duplicates, excluded
        outcome = board_results_apply(
            topic=topic, results=counted, handled_offsets=handled, boards=decoded.boards
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
    _, _, board_rejections = _boards_check(messages)
    for index, rejection in board_rejections:
        rejected.append(RejectedItem(index, rejection.code, rejection.reason, rejection.field))
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
