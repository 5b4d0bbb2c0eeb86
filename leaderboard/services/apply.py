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
from leaderboard.redis import get_board_redis
from leaderboard.scripts import get_script
from seasons.models import (
    ScoringRule,
    Season,
)

logger = logging.getLogger(__name__)


class CountedResult(NamedTuple):
    """One stored result that must now count on its season's board and daily board.

    A NamedTuple (immutable, typed) rather than a frozen dataclass: one is built per ingested
    result, and it is about three times cheaper to build.
    """

    partition: int
    offset: int
    season_id: int
    player_id: int
    points: int
    ticks: int
    day: date  # the UTC day of achieved_at
    xid: int  # the PostgreSQL transaction that stored it (rebuild protocol)


@dataclass(frozen=True, slots=True)
class BoardsApplied:
    applied: int  # results now on the boards
    already_applied: int  # dropped: another consumer of the partition had applied them
    overflowed: tuple[str, ...]  # "board member" pairs whose cumulative sum the codec can't hold


def daily_board_expire_at(*, day: date, now: datetime) -> int:
    """When a daily board expires: TTL days after its day ends (or after a late write to it).

    Kept past the day itself so the weekly board of its ISO week can still be built from it.
    """
    end_of_day = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1)
    ttl = timedelta(days=settings.LEADERBOARD_DAILY_TTL_DAYS)
    return int((max(end_of_day, now) + ttl).timestamp())


class _BoardNames:
    """Board keys of one batch, built once per season and per (season, day)."""

    def __init__(self) -> None:
        self._season: dict[int, str] = {}
        self._daily: dict[tuple[int, date], str] = {}

    def of(self, r: CountedResult) -> tuple[str, str]:
        season_key = self._season.get(r.season_id)
        if season_key is None:
            season_key = self._season[r.season_id] = keys.season_board(season_id=r.season_id)
        daily_key = self._daily.get((r.season_id, r.day))
        if daily_key is None:
            daily_key = self._daily[(r.season_id, r.day)] = keys.daily_board(
                season_id=r.season_id, day=r.day
            )
        return season_key, daily_key


def _collapse(
    results: Sequence[CountedResult], seasons: Mapping[int, Season], names: _BoardNames
) -> dict[tuple[str, int, int], tuple[int, int]]:
    """One write per (board, player, xid): the batch's contribution under the season's rule.

    xid stays in the key because a rebuild running meanwhile must see each transaction's results
    apart (a cumulative sum mixing counted and uncounted ones would double the counted part).
    """
    merged: dict[tuple[str, int, int], tuple[int, int]] = {}
    for r in results:
        best = seasons[r.season_id].rule == ScoringRule.BEST
        for board in names.of(r):
            slot = (board, r.player_id, r.xid)
            old = merged.get(slot)
            if old is None:
                merged[slot] = (r.points, r.ticks)
            elif best:
                if r.points > old[0] or (r.points == old[0] and r.ticks < old[1]):
                    merged[slot] = (r.points, r.ticks)
            else:
                merged[slot] = (old[0] + r.points, max(old[1], r.ticks))
    return merged


def _script_args(
    *,
    partition: int,
    results: Sequence[CountedResult],
    handled_offset: int,
    seasons: Mapping[int, Season],
) -> tuple[list[str], list[str], list[str | int]]:
    """(board keys in script order, KEYS after the watermark, ARGV) of one partition's call."""
    names = _BoardNames()
    boards: dict[str, tuple[Season, date | None]] = {}
    for r in results:
        season_key, daily_key = names.of(r)
        if daily_key not in boards:
            season = seasons[r.season_id]
            boards[season_key] = (season, None)
            boards[daily_key] = (season, r.day)
    now = datetime.now(UTC)
    index: dict[str, int] = {}
    key_args: list[str] = []
    board_args: list[str | int] = []
    for n, (board, (season, day)) in enumerate(boards.items(), start=1):
        index[board] = n
        key_args += [
            board,
            keys.rebuild_marker(board_key=board),
            keys.rebuild_pending(board_key=board),
            keys.rebuild_delta(board_key=board),
        ]
        expire_at = 0 if day is None else daily_board_expire_at(day=day, now=now)
        board_args += [season.rule, season.time_bits, season.codec.max_points, expire_at]
    entries = ";".join(
        f"{index[board]} {player} {points} {ticks} {xid}"
        for (board, player, xid), (points, ticks) in _collapse(results, seasons, names).items()
    )
    head: list[str | int] = [partition, min(r.offset for r in results), handled_offset, len(boards)]
    return list(boards), key_args, [*head, *board_args, entries]


def board_results_apply(
    *,
    topic: str,
    results: Sequence[CountedResult],
    handled_offsets: Mapping[int, int],
    seasons: Mapping[int, Season],
) -> BoardsApplied:
    """Put results on their season and daily boards, exactly once per Kafka offset.

    ``handled_offsets`` maps each partition in the batch to the highest offset the caller has
    dealt with (applied, rejected or found to be a duplicate). One script call per partition,
    all pipelined: each call checks the partition's applied-offset watermark, writes the boards
    and moves the watermark atomically (docs/ingestion.md).
    """
    client = get_board_redis()
    script = get_script(client, "apply_results")
    watermark = keys.ingest_applied_offsets(topic=topic)
    by_partition: dict[int, list[CountedResult]] = defaultdict(list)
    for r in results:
        by_partition[r.partition].append(r)
    applied = 0
    already = 0
    overflowed: list[str] = []
    while by_partition:
        pipe = client.pipeline(transaction=False)
        order = sorted(by_partition)
        board_names: list[list[str]] = []
        for partition in order:
            names, key_args, args = _script_args(
                partition=partition,
                results=by_partition[partition],
                handled_offset=handled_offsets[partition],
                seasons=seasons,
            )
            board_names.append(names)
            script(keys=[watermark, *key_args], args=args, client=pipe)
        replies = pipe.execute()
        retry: dict[int, list[CountedResult]] = {}
        for partition, names, reply in zip(order, board_names, replies, strict=True):
            batch = by_partition[partition]
            if int(reply[0]) == 1:
                applied += len(batch)
                for slot in reply[2:]:
                    board_index, member = slot.decode().split(" ", 1)
                    overflowed.append(f"{names[int(board_index) - 1]} {member}")
                continue
            # Another consumer (the partition moved during a rebalance) applied part of it.
            applied_offset = int(reply[1])
            remaining = [r for r in batch if r.offset > applied_offset]
            already += len(batch) - len(remaining)
            if remaining:
                retry[partition] = remaining
        by_partition = defaultdict(list, retry)
    if overflowed:
        logger.error(
            "cumulative points overflow the codec; results left off the board: %s", overflowed
        )
    return BoardsApplied(applied=applied, already_applied=already, overflowed=tuple(overflowed))
