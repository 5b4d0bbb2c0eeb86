"""The batch handler behind the Kafka consumer: one polled batch onto both sinks.

``match_results_ingest`` takes one polled batch (any number of partitions) through four steps:
decode and validate, dead-letter what is invalid, store the rest in PostgreSQL in one
statement (``leaderboard.services.match_results_store``), and apply what must count to the
boards in one pipelined Redis round trip. It is idempotent: running it again on the same
records (a retry, or a redelivery after a crash) adds nothing twice. docs/ingestion.md explains
why.

The results travel through the steps column by column (one list per field, index i being one
result), not as an object per result: at tens of thousands of results a second, building and
reading per-result objects was a large share of the consumer's CPU.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from functools import partial
from itertools import groupby
from typing import Any, TypeVar

from leaderboard.models import RefusalCode, ScoringRule
from leaderboard.rank_events import OutboxEntry, RankEventSink, rank_event_sink
from leaderboard.selectors.boards import BoardRef
from leaderboard.selectors.results import LatestResults, latest_results_get
from leaderboard.services import (
    BoardsDeleted,
    CountedGroup,
    Refusal,
    ResultColumns,
    StoredBatch,
    board_groups_apply,
    match_results_store,
    rank_events_outbox_trim,
    rank_events_publish,
    refusals_mark_dead_lettered,
)
from players.schema import ProfileRejected, ProfileUpdate, name_update
from players.services import player_profiles_upsert

from ..dead_letters import DeadLetterSink
from ..records import DeadLetter, Record
from ..retrying import Retrying, run_once
from ..schema import (
    SEASON_CLOSED,
    UNEXPECTED,
    MatchResultMessage,
    MessageRejected,
    message_decode,
)
from ..stats import BatchOutcome
from .checks import messages_check_boards

logger = logging.getLogger(__name__)

T = TypeVar("T")


def _pick(column: list[T], indices: list[int]) -> list[T]:
    """``column`` at ``indices``: a slice (made in C) when they are one run, as they usually
    are (records come partition by partition)."""
    first, last = indices[0], indices[-1]
    if last - first + 1 == len(indices):
        return column[first : last + 1]
    return [column[i] for i in indices]


# --- 1. decode and validate ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DecodedBatch:
    """The valid results of a batch, column by column, and what was set aside."""

    results: ResultColumns
    dead_letters: list[DeadLetter]
    boards: dict[int, BoardRef]
    # The results' displayName (contract 0.3) as name updates at their achievedAt, and how
    # many results carried one that is invalid (skipped; the result counts all the same).
    names: list[ProfileUpdate]
    names_skipped: int


def match_results_decode(*, records: Sequence[Record]) -> DecodedBatch:
    """Validate every record; one season and board query per batch."""
    parsed: list[Record] = []
    messages: list[MatchResultMessage] = []
    letters: list[DeadLetter] = []
    for record in records:
        try:
            message = message_decode(record.value)
        except MessageRejected as exc:
            letters.append(DeadLetter(record, exc.code, exc.reason))
            continue
        except Exception as exc:
            # Untrusted bytes met a case the checks do not foresee: one message must never
            # stop the consumer, so it goes to the dead-letter topic and the bug to the log.
            logger.exception("unexpected error validating offset %d", record.offset)
            letters.append(DeadLetter(record, UNEXPECTED, f"{type(exc).__name__}: {exc}"))
            continue
        parsed.append(record)
        messages.append(message)
    checked = messages_check_boards(messages=messages)
    board_ids = checked.board_ids
    if checked.rejected:
        for index, rejection in checked.rejected:
            letters.append(DeadLetter(parsed[index], rejection.code, rejection.reason))
        keep = [i for i, board_id in enumerate(board_ids) if board_id is not None]
        parsed = [parsed[i] for i in keep]
        messages = [messages[i] for i in keep]
        board_ids = [board_ids[i] for i in keep]
    results = ResultColumns(
        [m.match_id for m in messages],
        [m.player_id for m in messages],
        [m.season_id for m in messages],
        board_ids,  # type: ignore[arg-type]  # the rejected (None) were left out above
        [m.points for m in messages],
        [m.achieved_at for m in messages],
        [r.partition for r in parsed],
        [r.offset for r in parsed],
        _metadata_kept(messages, board_ids, checked.boards),  # type: ignore[arg-type]
        _tiebreakers_of(messages, board_ids, checked.boards),  # type: ignore[arg-type]
    )
    names, skipped = _names_of(messages, parsed)
    return DecodedBatch(results, letters, checked.boards, names, skipped)


def _metadata_kept(
    messages: list[MatchResultMessage], board_ids: list[int], boards: dict[int, BoardRef]
) -> list[bytes | None]:
    """Each result's metadata where its board keeps metadata (None elsewhere: stored for
    nothing, it would only cost space)."""
    keeping = {board_id for board_id, board in boards.items() if board.keeps_metadata}
    if not keeping:
        return [None] * len(messages)
    return [
        message.metadata if board_id in keeping else None
        for message, board_id in zip(messages, board_ids, strict=True)
    ]


def _tiebreakers_of(
    messages: list[MatchResultMessage], board_ids: list[int], boards: dict[int, BoardRef]
) -> list[list[int] | None]:
    """Each result's tie-break values in its board's column order (None on plain boards)."""
    columns = {board_id: b.tiebreak_names for board_id, b in boards.items() if b.tiebreaks}
    if not columns:
        return [None] * len(messages)
    return [
        message.tiebreak_values(names) if (names := columns.get(board_id)) else None
        for message, board_id in zip(messages, board_ids, strict=True)
    ]


def _names_of(
    messages: list[MatchResultMessage], records: list[Record]
) -> tuple[list[ProfileUpdate], int]:
    """The valid results' displayName as name updates. A bad name sets nothing aside: the
    contract calls it the same update as a profile's, and a profile's bad name would not
    take the player's points away, so the result counts and only its name is skipped (logged
    and counted)."""
    names: list[ProfileUpdate] = []
    skipped = 0
    for message, record in zip(messages, records, strict=True):
        if message.display_name is None:
            continue
        try:
            names.append(
                name_update(
                    player_id=message.player_id,
                    display_name=message.display_name,
                    at=message.achieved_at,
                )
            )
        except ProfileRejected as exc:
            skipped += 1
            logger.info(
                "match result at partition %d offset %d: displayName skipped (%s): %s",
                record.partition,
                record.offset,
                exc.code,
                exc.reason,
            )
    return names, skipped


# --- 2b. what tournament boards refused ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Refused:
    decoded: DecodedBatch  # the batch without the refused results
    letters: list[DeadLetter]  # the refusals this batch dead-letters
    lettered: list[Refusal]  # their refusals, marked once the letters are acknowledged
    duplicates: int  # refused before, or by another record: no second letter


def _refused_split(
    decoded: DecodedBatch, stored: StoredBatch, records: Sequence[Record]
) -> _Refused:
    """Take what tournament boards refused (stored.refused) out of the batch: the records the
    refusals were decided for, and whose letters were not acknowledged yet, become dead letters;
    the others are duplicates (docs/tournaments.md, "Refused results, exactly once")."""
    results = decoded.results
    by_key = {(r.partition, r.offset): r for r in records}
    letters: list[DeadLetter] = []
    lettered: list[Refusal] = []
    duplicates = 0
    keep: list[int] = []
    dropped: set[tuple[int, datetime]] = set()
    for i, key in enumerate(zip(results.kafka_partitions, results.kafka_offsets, strict=True)):
        refusal = stored.refused.get(key)
        if refusal is None:
            keep.append(i)
            continue
        dropped.add((results.player_ids[i], results.achieved_at[i]))
        if not refusal.dead_letter:
            duplicates += 1
            continue
        board = decoded.boards[refusal.board_id]
        where = f"board {board.slug!r} of season {board.season_id}"
        if refusal.code == SEASON_CLOSED:
            # Closed between the batch's checks and its store: no record of its own to keep.
            reason = f"season {board.season_id} is closed and accepts no more results"
            letters.append(DeadLetter(by_key[key], refusal.code, reason))
            continue
        reason = (
            f"player {refusal.player_id} has not joined {where} (it requires joining)"
            if refusal.code == RefusalCode.NOT_JOINED
            else f"player {refusal.player_id} has no attempt left on {where} (at most "
            f"{board.max_attempts} distinct matches)"
        )
        letters.append(DeadLetter(by_key[key], refusal.code, reason))
        lettered.append(refusal)
    kept = ResultColumns(*(_pick_all(column, keep) for column in _columns(results)))
    # A refused result's displayName is not applied, as a dead-lettered one's; unless a result
    # kept carries it too (the same match sent for main and for a tournament board the player
    # has not joined: main's counts, and so does its name).
    dropped -= {(results.player_ids[i], results.achieved_at[i]) for i in keep}
    names = [n for n in decoded.names if (n.player_id, n.updated_at) not in dropped]
    return _Refused(
        DecodedBatch(kept, decoded.dead_letters, decoded.boards, names, decoded.names_skipped),
        letters,
        lettered,
        duplicates,
    )


def _columns(results: ResultColumns) -> list[list[Any]]:
    return [getattr(results, f.name) for f in fields(ResultColumns)]


def _pick_all(column: list[T], indices: list[int]) -> list[T]:
    return [column[i] for i in indices]


# --- 3. apply ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Counted:
    groups: list[CountedGroup]  # one per (partition, board) with results to apply
    duplicates: int  # results another message stored
    excluded: int  # stored by this message, left off by the rules (banned, voided, not latest)


def _counted(decoded: DecodedBatch, stored: StoredBatch, latest: LatestResults) -> _Counted:
    """The results to put on the boards, grouped per (partition, board), as PostgreSQL decides.

    A result is a candidate iff it was stored by this very message (now, or before a crash).
    Under the latest rule it then counts only where PostgreSQL holds it as the player's latest
    result (season-long, and of its day): an older result delivered later changes nothing,
    whatever the order of delivery. Whether a candidate already reached its board is not
    decided here: the apply script decides it, atomically with the write (docs/ingestion.md).

    Column by column: in the usual batch (every row inserted now, no latest-rule board) no step
    here runs Python code per result beyond building the ticks and days.
    """
    results = decoded.results
    boards = decoded.boards
    partitions, offsets, board_ids = (
        results.kafka_partitions,
        results.kafka_offsets,
        results.board_ids,
    )
    n = len(results)
    # The storing transaction of each row; None: every row was inserted now, by stored.xid.
    xids: list[int] | None = None
    duplicates = excluded = 0
    candidates: Sequence[int] = range(n)
    if stored.others or stored.banned:
        xids = [stored.xid] * n
        keep: list[int] = []
        for i in range(n):
            row = stored.row(partition=partitions[i], offset=offsets[i])
            if not row.from_this_message:
                duplicates += 1
            elif row.excluded or row.xid is None:
                excluded += 1
            else:
                keep.append(i)
                xids[i] = row.xid
        candidates = keep
    latest_boards = {b.id for b in boards.values() if b.rule == ScoringRule.LATEST}
    days = [at.date() for at in results.achieved_at]  # achieved_at is in UTC (the schema's)
    # Under the latest rule: where each candidate counts (season-long, daily).
    flags: dict[int, tuple[bool, bool]] = {}
    if latest_boards:
        keep = []
        for i in candidates:
            if board_ids[i] not in latest_boards:
                keep.append(i)
                continue
            player, match_id = results.player_ids[i], results.match_ids[i]
            season_long = latest.season_long.get((board_ids[i], player)) == match_id
            daily = latest.daily.get((board_ids[i], player, days[i])) == match_id
            if season_long or daily:
                keep.append(i)
                flags[i] = (season_long, daily)
            else:
                # Stored, but a later result of the player holds the board: not counted.
                excluded += 1
        candidates = keep
    if not candidates:
        return _Counted([], duplicates, excluded)
    # Candidates per (partition, board): contiguous runs of the batch (records come partition
    # by partition; one board per season in the usual case), found in C.
    group_of = list(zip(partitions, board_ids, strict=True))
    where: dict[tuple[int, int], list[int]] = {}
    for key, run in groupby(candidates, key=group_of.__getitem__):
        where.setdefault(key, []).extend(run)
    groups: list[CountedGroup] = []
    for (partition, board_id), indices in where.items():
        board = boards[board_id]
        starts_at = board.season.starts_at
        resolution = board.codec.resolution_seconds
        achieved = _pick(results.achieved_at, indices)
        group_xids = [stored.xid] * len(indices) if xids is None else _pick(xids, indices)
        groups.append(
            CountedGroup(
                partition,
                board_id,
                _pick(offsets, indices),
                _pick(results.player_ids, indices),
                _pick(results.points, indices),
                # The codec's ticks (ScoreCodec.ticks): whole seconds since the season's start
                # per tick of its resolution (the window check put achieved_at in the season).
                [
                    ((e := at - starts_at).days * 86_400 + e.seconds) // resolution
                    for at in achieved
                ],
                _pick(days, indices),
                group_xids,
                [flags[i][0] for i in indices] if board_id in latest_boards else None,
                [flags[i][1] for i in indices] if board_id in latest_boards else None,
                _pick(results.tiebreakers, indices)  # type: ignore[arg-type]
                if board.tiebreaks
                else None,
                # What the board's rank events carry (none: not sent to the script).
                _pick(results.match_ids, indices) if board.rank_events else None,  # type: ignore[arg-type]
                [int(at.timestamp()) for at in achieved] if board.rank_events else None,
            )
        )
    return _Counted(groups, duplicates, excluded)


def _latest_of(decoded: DecodedBatch, stored: StoredBatch) -> LatestResults:
    """PostgreSQL's latest result of each (latest-rule board, player) and (.., day) in the batch."""
    latest_boards = {b.id for b in decoded.boards.values() if b.rule == ScoringRule.LATEST}
    if not latest_boards:
        return LatestResults({}, {})
    results = decoded.results
    candidates = {
        (board_id, player, at)
        for p, o, player, at, board_id in zip(
            results.kafka_partitions,
            results.kafka_offsets,
            results.player_ids,
            results.achieved_at,
            results.board_ids,
            strict=True,
        )
        if board_id in latest_boards and stored.row(partition=p, offset=o).from_this_message
    }
    if not candidates:
        return LatestResults({}, {})
    return latest_results_get(candidates=candidates)


# --- the batch -----------------------------------------------------------------------------


def _outboxes_owed(decoded: DecodedBatch, counted: _Counted) -> set[tuple[int, int]]:
    """The (partition, board) pairs of the batch left without a script call: a redelivery after
    a crash between the apply and the publish, with the results since voided or banned, would
    otherwise leave that attempt's events in the outbox. Empty at no cost in the usual batch,
    where no result was dropped."""
    if not (counted.duplicates or counted.excluded):
        return set()
    results = decoded.results
    called = {(group.partition, group.board_id) for group in counted.groups}
    return set(zip(results.kafka_partitions, results.board_ids, strict=True)) - called


def match_results_ingest(
    *,
    topic: str,
    records: Sequence[Record],
    dead_letters: DeadLetterSink,
    retrying: Retrying = run_once,
    rank_events: RankEventSink | None = None,
    boards_failed: Callable[[], None] | None = None,
) -> BatchOutcome:
    """Handle one polled batch; when it returns, both sinks hold it, its rank events are on
    Kafka, and offsets may be committed.

    ``retrying`` wraps each step that talks to a dependency, so a dependency that goes away
    makes the step wait and run again (each step is safe to repeat). ``rank_events``: where the
    boards' rank events go (default: the process's producer on KAFKA_RANK_EVENTS_TOPIC).
    ``boards_failed``: called before each new attempt at the boards after one failed (the
    consumer's failover watch). A Redis that failed over may have lost writes it had
    acknowledged; the next apply would raise the board's watermark past them and hide them from
    the lost-writes repair, so the repair runs first, and the call raises a Redis error (the
    step waits) while it cannot run yet.
    """
    if not records:
        return BatchOutcome(0, 0, 0, 0, 0)
    handled: dict[int, int] = {}
    for record in records:
        partition = record.partition
        if record.offset > handled.get(partition, -1):
            handled[partition] = record.offset

    while True:
        decoded = retrying("PostgreSQL", lambda: match_results_decode(records=records))
        try:
            # 2. store
            stored = retrying("PostgreSQL", partial(match_results_store, results=decoded.results))
            break
        except BoardsDeleted as exc:
            # Staff deleted a season or board that had no results yet: validating again turns
            # its results into dead letters (unknown season or board).
            logger.warning("%s; validating the batch again", exc)
    letters = decoded.dead_letters
    refused_duplicates = 0
    lettered: list[Refusal] = []
    if stored.refused:
        refused = _refused_split(decoded, stored, records)
        decoded, refused_duplicates, lettered = (
            refused.decoded,
            refused.duplicates,
            refused.lettered,
        )
        letters = [*letters, *refused.letters]
    if letters:
        retrying("Kafka", lambda: dead_letters.publish(letters=letters))
    if lettered:
        # Acknowledged: from now on a redelivery or a replay of these records is a duplicate.
        # A crash before this commit sends them once more (never loses them).
        retrying("PostgreSQL", lambda: refusals_mark_dead_lettered(refusals=lettered))
    # Read after the batch committed: it decides which results hold a latest-rule board.
    latest = retrying("PostgreSQL", lambda: _latest_of(decoded, stored))

    attempts = 0

    def apply() -> tuple[int, int, int, tuple[OutboxEntry, ...]]:
        nonlocal attempts
        attempts += 1
        if attempts > 1 and boards_failed is not None:
            boards_failed()
        counted = _counted(decoded, stored, latest)
        owed = _outboxes_owed(decoded, counted)
        if not counted.groups and not owed:
            return 0, counted.duplicates, counted.excluded, ()
        # The script of each (partition, board) call is the exactly-once decision: it writes
        # only offsets above the board's watermark and moves the watermark in the same atomic
        # call; the offsets it reports covered (a redelivery, a retry after a lost reply, a
        # partition's other owner) are dropped and the rest sent again.
        outcome = board_groups_apply(
            topic=topic,
            groups=counted.groups,
            handled_offsets=handled,
            boards=decoded.boards,
            outboxes_owed=owed,
        )
        # An overflowing cumulative sum is logged by board_groups_apply; the result stays
        # stored and counted as applied here (the rebuild reports it too).
        return (
            outcome.applied,
            counted.duplicates + outcome.already_applied,
            counted.excluded,
            outcome.events,
        )

    applied, duplicates, excluded, events = retrying("Redis", apply)
    published = 0
    if events:
        # 4. the rank events the apply wrote to the boards' outboxes: on Kafka, then out of the
        # outboxes, before the caller commits (a crash in between publishes them again).
        sink = rank_events if rank_events is not None else rank_event_sink()
        published = retrying(
            "Kafka (rank events)", lambda: rank_events_publish(entries=events, sink=sink)
        )
        retrying("Redis (rank events)", lambda: rank_events_outbox_trim(entries=events))
    if decoded.names:
        # After the boards (what the players wait to see); idempotent like the rest, so a
        # redelivery sets nothing twice. The name cache is written when it commits.
        retrying(
            "PostgreSQL and Redis (player names)",
            lambda: player_profiles_upsert(profiles=decoded.names),
        )
    return BatchOutcome(
        records=len(records),
        applied=applied,
        duplicates=duplicates + refused_duplicates,
        dead_letters=len(letters),
        not_counted=excluded,
        names_skipped=decoded.names_skipped,
        rank_events=published,
    )
