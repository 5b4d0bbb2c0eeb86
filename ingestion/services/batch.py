"""The batch handler behind the Kafka consumer: one polled batch onto both sinks.

``match_results_ingest`` takes one polled batch (any number of partitions) through four steps:
decode and validate, dead-letter what is invalid, store the rest in PostgreSQL in one
statement (``leaderboard.services.match_results_store``), and apply what must count to the
boards in one pipelined Redis round trip. It is idempotent: running it again on the same
records (a retry, or a redelivery after a crash) adds nothing twice. docs/ingestion.md explains
why.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC
from functools import partial

from leaderboard.board_scores import LatestResults, latest_results_get
from leaderboard.models import ScoringRule
from leaderboard.selectors import BoardRef
from leaderboard.services import (
    BoardsDeleted,
    CountedResult,
    ResultRow,
    board_results_apply,
    match_results_store,
)

from ..dead_letters import DeadLetterSink
from ..records import ConsumedRecord, DeadLetter, StoredResult, ValidResult
from ..retrying import Retrying, run_once
from ..schema import UNEXPECTED, MatchResultMessage, MessageRejected, message_decode
from ..stats import BatchOutcome
from .checks import messages_check_boards

logger = logging.getLogger(__name__)


# --- 1. decode and validate ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DecodedBatch:
    valid: list[ValidResult]
    dead_letters: list[DeadLetter]
    boards: dict[int, BoardRef]


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
    boards, checked, rejected = messages_check_boards(
        messages=list(enumerate(m for _, m in parsed))
    )
    for index, rejection in rejected:
        letters.append(DeadLetter(parsed[index][0], rejection.code, rejection.reason))
    valid = [
        ValidResult(parsed[index][0].partition, parsed[index][0].offset, parsed[index][1], board_id)
        for index, board_id in checked
    ]
    return DecodedBatch(valid, letters, boards)


# --- 2. store ------------------------------------------------------------------------------


def _store(results: Sequence[ValidResult]) -> list[StoredResult]:
    """Store the valid results; what the table holds for each, in order.

    Raises BoardsDeleted, storing nothing, if a board of the batch no longer exists.
    """
    rows = [
        ResultRow(
            m.match_id,
            m.player_id,
            m.season_id,
            r.board_id,
            m.points,
            m.achieved_at,
            r.partition,
            r.offset,
        )
        for r in results
        for m in (r.message,)
    ]
    return [
        StoredResult(r, s.xid, s.from_this_message, s.excluded)
        for r, s in zip(results, match_results_store(rows=rows), strict=True)
    ]


# --- 3. apply ------------------------------------------------------------------------------


def _counted(
    stored: Sequence[StoredResult],
    *,
    boards: Mapping[int, BoardRef],
    latest: LatestResults,
) -> tuple[list[CountedResult], int, int]:
    """(candidates for the boards, duplicates, excluded) as PostgreSQL decides them.

    A result is a candidate iff it was stored by this very message (now, or before a crash).
    Under the latest rule it then counts only where PostgreSQL holds it as the player's latest
    result (season-long, and of its day): an older result delivered later changes nothing,
    whatever the order of delivery. Whether a candidate already reached its board is not
    decided here: the apply script decides it, atomically with the write (docs/ingestion.md).
    """
    counted: list[CountedResult] = []
    duplicates = excluded = 0
    for s in stored:
        r = s.result
        m = r.message
        if not s.from_this_message:
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
    retrying: Retrying = run_once,
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
            stored = retrying("PostgreSQL", partial(_store, decoded.valid))
            break
        except BoardsDeleted as exc:
            # Staff deleted a season or board that had no results yet: validating again turns
            # its results into dead letters (unknown season or board).
            logger.warning("%s; validating the batch again", exc)
    if decoded.dead_letters:
        retrying("Kafka", lambda: dead_letters.publish(letters=decoded.dead_letters))
    # Read after the batch committed: it decides which results hold a latest-rule board.
    latest = retrying("PostgreSQL", lambda: _latest_of(stored, decoded.boards))

    def apply() -> tuple[int, int, int]:
        counted, duplicates, excluded = _counted(stored, boards=decoded.boards, latest=latest)
        if not counted:
            return 0, duplicates, excluded
        # The script of each (partition, board) call is the exactly-once decision: it writes
        # only offsets above the board's watermark and moves the watermark in the same atomic
        # call; the offsets it reports covered (a redelivery, a retry after a lost reply, a
        # partition's other owner) are dropped and the rest sent again.
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
