"""Ingestion's write to the boards: counted results applied exactly once per Kafka offset."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import NamedTuple

from django.conf import settings

from leaderboard import keys
from leaderboard.models import ScoringRule
from leaderboard.redis import get_board_redis
from leaderboard.scripts import ScriptCall, get_script, scripts_pipelined
from leaderboard.selectors import BoardRef

logger = logging.getLogger(__name__)


class CountedResult(NamedTuple):
    """One stored result that must now count on its board (season-long and/or daily).

    A NamedTuple (immutable, typed) rather than a frozen dataclass: one is built per ingested
    result, and it is about three times cheaper to build.
    """

    partition: int
    offset: int
    board_id: int
    player_id: int
    points: int
    ticks: int
    day: date  # the UTC day of achieved_at
    xid: int  # the PostgreSQL transaction that stored it (rebuild protocol)
    # Under the latest rule a result counts only where it is the player's latest result
    # (season-long, and of its day), as PostgreSQL decides; under best and cumulative, both.
    season_long: bool = True
    daily: bool = True


@dataclass(frozen=True, slots=True)
class BoardsApplied:
    applied: int  # results now on the boards
    # Dropped: the board's watermark already covered them (a redelivery, a retry after a lost
    # reply, or another consumer of the partition got there first).
    already_applied: int
    overflowed: tuple[str, ...]  # "board-key member" pairs whose cumulative sum overflows


def daily_board_expire_at(*, day: date, now: datetime) -> int:
    """When a daily board expires: TTL days after its day ends (or after a late write to it).

    Kept past the day itself so the weekly board of its ISO week can still be built from it.
    """
    end_of_day = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1)
    ttl = timedelta(days=settings.LEADERBOARD_DAILY_TTL_DAYS)
    return int((max(end_of_day, now) + ttl).timestamp())


def _collapse(
    results: Sequence[CountedResult], board: BoardRef, board_key: str
) -> dict[tuple[str, int, int], tuple[int, int]]:
    """One write per (key, player, xid): the batch's contribution under the board's rule.

    xid stays in the key because a rebuild running meanwhile must see each transaction's results
    apart (a cumulative sum mixing counted and uncounted ones would double the counted part).
    """
    merged: dict[tuple[str, int, int], tuple[int, int]] = {}
    rule = board.rule
    sign = -1 if board.ascending else 1
    for r in results:
        for key, counts in (
            (board_key, r.season_long),
            (keys.daily_board(board_id=board.id, day=r.day), r.daily),
        ):
            if not counts:
                continue
            slot = (key, r.player_id, r.xid)
            old = merged.get(slot)
            if old is None or rule == ScoringRule.LATEST:
                # latest: the caller sends at most one result per key and player.
                merged[slot] = (r.points, r.ticks)
            elif rule == ScoringRule.BEST:
                # The better value for the board's order; equal values: the earlier.
                if (sign * r.points, -r.ticks) > (sign * old[0], -old[1]):
                    merged[slot] = (r.points, r.ticks)
            else:
                merged[slot] = (old[0] + r.points, max(old[1], r.ticks))
    return merged


def _script_args(
    *,
    board: BoardRef,
    partition: int,
    results: Sequence[CountedResult],
    handled_offset: int,
) -> tuple[list[str], list[str], list[str | int]]:
    """(key group names in script order, KEYS after the watermark, ARGV) of one call."""
    board_key = keys.board(board_id=board.id)
    groups: dict[str, date | None] = {}
    for r in results:
        if r.season_long:
            groups.setdefault(board_key, None)
        if r.daily:
            groups.setdefault(keys.daily_board(board_id=board.id, day=r.day), r.day)
    now = datetime.now(UTC)
    index: dict[str, int] = {}
    key_args: list[str] = []
    expiries: list[str | int] = []
    for n, (key, day) in enumerate(groups.items(), start=1):
        index[key] = n
        key_args += [
            key,
            keys.rebuild_marker(board_key=key),
            keys.rebuild_pending(board_key=key),
            keys.rebuild_delta(board_key=key),
            keys.rebuild_done(board_key=key),
        ]
        expiries.append(0 if day is None else daily_board_expire_at(day=day, now=now))
    entries = ";".join(
        f"{index[key]} {player} {points} {ticks} {xid}"
        for (key, player, xid), (points, ticks) in _collapse(results, board, board_key).items()
    )
    codec = board.codec
    head: list[str | int] = [
        partition,
        min(r.offset for r in results),
        handled_offset,
        board.rule,
        board.order,
        codec.time_bits,
        codec.max_points,
        len(groups),
    ]
    return list(groups), key_args, [*head, *expiries, entries]


def board_results_apply(
    *,
    topic: str,
    results: Sequence[CountedResult],
    handled_offsets: Mapping[int, int],
    boards: Mapping[int, BoardRef],
) -> BoardsApplied:
    """Put results on their boards (season-long and daily), exactly once per Kafka offset.

    ``handled_offsets`` maps each partition in the batch to the highest offset the caller has
    dealt with (applied, rejected or found to be a duplicate). One script call per partition and
    board, all pipelined: each checks the board's applied-offset watermark for the partition,
    writes the board and moves its watermark atomically, touching keys of that board's slot only
    (docs/ingestion.md). The script alone decides what is already on the board: a call whose
    lowest offset its watermark covers writes nothing and returns the watermark; its offsets at
    or below it are dropped (``already_applied``) and the rest sent again.
    """
    client = get_board_redis()
    script = get_script(client, "apply_results")
    pending: dict[tuple[int, int], list[CountedResult]] = defaultdict(list)
    for r in results:
        pending[(r.partition, r.board_id)].append(r)
    applied = 0
    already = 0
    overflowed: list[str] = []
    while pending:
        order = sorted(pending)
        group_names: list[list[str]] = []
        calls: list[ScriptCall] = []
        for partition, board_id in order:
            board = boards[board_id]
            names, key_args, args = _script_args(
                board=board,
                partition=partition,
                results=pending[(partition, board_id)],
                handled_offset=handled_offsets[partition],
            )
            group_names.append(names)
            watermark = keys.ingest_applied_offsets(board_id=board_id, topic=topic)
            calls.append(ScriptCall(script=script, keys=[watermark, *key_args], args=args))
        # Each call touches one board's slot; a cluster pipeline sends them grouped per node.
        replies = scripts_pipelined(client, calls)
        retry: dict[tuple[int, int], list[CountedResult]] = {}
        for slot, names, reply in zip(order, group_names, replies, strict=True):
            batch = pending[slot]
            if int(reply[0]) == 1:
                applied += len(batch)
                for item in reply[2:]:
                    group_index, member = item.decode().split(" ", 1)
                    overflowed.append(f"{names[int(group_index) - 1]} {member}")
                continue
            # Covered up to the watermark: a redelivery, a retry after a lost reply, or another
            # consumer (the partition moved during a rebalance) applied part of it.
            applied_offset = int(reply[1])
            remaining = [r for r in batch if r.offset > applied_offset]
            already += len(batch) - len(remaining)
            if remaining:
                retry[slot] = remaining
        pending = defaultdict(list, retry)
    if overflowed:
        logger.error(
            "cumulative points overflow the codec; results left off the board: %s", overflowed
        )
    return BoardsApplied(applied=applied, already_applied=already, overflowed=tuple(overflowed))


def applied_offsets_get(
    *, topic: str, partitions: Sequence[int], board_ids: Sequence[int]
) -> dict[tuple[int, int], int]:
    """(board, partition) -> the highest offset of ``topic`` already on that board (-1: none)."""
    pipe = get_board_redis().pipeline(transaction=False)
    for board_id in board_ids:
        pipe.hmget(keys.ingest_applied_offsets(board_id=board_id, topic=topic), list(partitions))
    found: dict[tuple[int, int], int] = {}
    for board_id, raw in zip(board_ids, pipe.execute(), strict=True):
        for partition, value in zip(partitions, raw, strict=True):
            found[(board_id, partition)] = -1 if value is None else int(value)
    return found
