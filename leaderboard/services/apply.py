"""Ingestion's write to the boards: counted results applied exactly once per Kafka offset."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, NamedTuple
from uuid import UUID

import msgspec
from django.conf import settings

from leaderboard import keys
from leaderboard.rank_events import OutboxEntry, outbox_entries_merge, topic_tag
from leaderboard.redis import get_board_redis
from leaderboard.scripts import ScriptCall, get_script, scripts_pipelined
from leaderboard.selectors.boards import BoardRef
from leaderboard.selectors.events import rank_events_outbox_read

logger = logging.getLogger(__name__)


class CountedResult(NamedTuple):
    """One stored result that must count on its board (season-long and/or daily), as a row:
    what tests, benchmarks and one-off callers hand to ``board_results_apply``. Ingestion builds
    ``CountedGroup`` columns directly."""

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
    # The tie-break column values, on a board with columns (in its column order).
    tiebreakers: tuple[int, ...] = ()
    # What its rank events carry (docs/events.md): the match id and achievedAt (unix seconds);
    # None: no match id, and the time of its tick.
    match_id: UUID | None = None
    at: int | None = None


@dataclass(frozen=True, slots=True)
class CountedGroup:
    """The results of one Kafka partition that must now count on one board, column by column
    (index i of every list is one result): no object per result."""

    partition: int
    board_id: int
    offsets: list[int]
    players: list[int]
    points: list[int]
    ticks: list[int]
    days: list[date]  # the UTC day of each result's achieved_at
    xids: list[int]  # the PostgreSQL transaction that stored each (rebuild protocol)
    # Where each counts (latest rule: where it is the player's latest result, as PostgreSQL
    # decides); None: every result counts season-long and daily (best, cumulative).
    season_long: list[bool] | None = None
    daily: list[bool] | None = None
    # On a board with tie-break columns: each result's values of the columns, in the board's
    # order (the script gets each result's whole key, encoded from them, the points and ticks).
    tiebreakers: list[list[int]] | None = None
    # For the board's rank events: each result's match id and achievedAt in unix seconds (None:
    # unknown, and the time of each result's tick).
    match_ids: list[UUID | None] | None = None
    at_seconds: list[int] | None = None

    def __len__(self) -> int:
        return len(self.offsets)

    def above(self, offset: int) -> CountedGroup:
        """The results whose offset is above ``offset``."""
        keep = [i for i, o in enumerate(self.offsets) if o > offset]

        def pick(column: list[Any] | None) -> list[Any] | None:
            return None if column is None else [column[i] for i in keep]

        return CountedGroup(
            self.partition,
            self.board_id,
            [self.offsets[i] for i in keep],
            [self.players[i] for i in keep],
            [self.points[i] for i in keep],
            [self.ticks[i] for i in keep],
            [self.days[i] for i in keep],
            [self.xids[i] for i in keep],
            pick(self.season_long),
            pick(self.daily),
            pick(self.tiebreakers),
            pick(self.match_ids),
            pick(self.at_seconds),
        )


def counted_groups(results: Iterable[CountedResult]) -> list[CountedGroup]:
    """``CountedResult`` rows as the columns of their (partition, board)."""
    rows: dict[tuple[int, int], list[CountedResult]] = defaultdict(list)
    for r in results:
        rows[(r.partition, r.board_id)].append(r)
    return [
        CountedGroup(
            partition,
            board_id,
            [r.offset for r in group],
            [r.player_id for r in group],
            [r.points for r in group],
            [r.ticks for r in group],
            [r.day for r in group],
            [r.xid for r in group],
            [r.season_long for r in group],
            [r.daily for r in group],
            [list(r.tiebreakers) for r in group] if group[0].tiebreakers else None,
            [r.match_id for r in group],
            _times(group),
        )
        for (partition, board_id), group in rows.items()
    ]


def _times(group: list[CountedResult]) -> list[int] | None:
    """The results' times, if every one has its own (else each event carries its tick's)."""
    times = [r.at for r in group if r.at is not None]
    return times if len(times) == len(group) else None


@dataclass(frozen=True, slots=True)
class BoardsApplied:
    applied: int  # results now on the boards
    # Dropped: the board's watermark already covered them (a redelivery, a retry after a lost
    # reply, or another consumer of the partition got there first).
    already_applied: int
    overflowed: tuple[str, ...]  # "board-key member" pairs whose cumulative sum overflows
    # The outbox entries to publish (rank_events_publish), in each outbox's order: those these
    # calls wrote, and, for a (board, partition) some of whose offsets were covered already,
    # every entry still in its outbox (a predecessor that crashed before publishing left them).
    events: tuple[OutboxEntry, ...] = ()


def daily_board_expire_at(*, day: date, now: datetime) -> int:
    """When a daily board expires: TTL days after its day ends (or after a late write to it).

    Kept past the day itself so the weekly board of its ISO week can still be built from it.
    """
    end_of_day = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1)
    ttl = timedelta(days=settings.LEADERBOARD_DAILY_TTL_DAYS)
    return int((max(end_of_day, now) + ttl).timestamp())


def _joined(numbers: list[int]) -> str:
    """The numbers as one space-separated argument (the script's column format)."""
    if numbers and numbers.count(numbers[0]) == len(numbers):
        # One value throughout (the storing transaction, usually): formatted once.
        return " ".join([str(numbers[0])] * len(numbers))
    return " ".join(map(str, numbers))


_uuids_json = msgspec.json.Encoder()


def _uuid_column(match_ids: Sequence[UUID | None]) -> str:
    """The match ids as one space-separated column ("-": none), in their canonical form. The
    UUIDs are written by msgspec's encoder in C, as JSON strings, rather than by ``str()`` each
    (half a microsecond a result, the largest part of the events columns' cost)."""
    if not match_ids or None in match_ids:
        return " ".join([str(m) if m is not None else "-" for m in match_ids])
    # ["a-b-...","c-d-..."]: a canonical UUID holds neither a quote nor a comma.
    return _uuids_json.encode(match_ids)[2:-2].decode("ascii").replace('","', " ")


def _event_args(*, topic: str, board: BoardRef, group: CountedGroup) -> list[str | int]:
    """The scripts' rank events arguments: top N (0: none), the topic's tag, board, season,
    slug, and the offsets, match ids and times columns (empty without events)."""
    tag = topic_tag(topic)
    if not board.rank_events:
        return [0, tag, board.id, board.season_id, board.slug, "", "", ""]
    n = len(group)
    match_ids = " ".join(["-"] * n) if group.match_ids is None else _uuid_column(group.match_ids)
    if group.at_seconds is None:
        start = int(board.season.starts_at.timestamp())
        resolution = board.codec.resolution_seconds
        at_seconds = " ".join([str(start + t * resolution) for t in group.ticks])
    else:
        at_seconds = _joined(group.at_seconds)
    return [
        board.event_top_n,
        tag,
        board.id,
        board.season_id,
        board.slug,
        _joined(group.offsets),
        match_ids,
        at_seconds,
    ]


def _script_args(
    *, topic: str, board: BoardRef, group: CountedGroup, handled_offset: int, now: datetime
) -> tuple[list[str], list[str], list[str | int]]:
    """(key group names in script order, KEYS after the watermark, ARGV) of one call.

    Per-result work stays in C (joins of the columns); keys and expiries are made once per key
    group, not per result.
    """
    board_key = keys.board(board_id=board.id)
    n = len(group)
    names: list[str] = []
    expiries: list[str | int] = []
    if group.season_long is None:
        names.append(board_key)
        expiries.append(0)
        season_long = " ".join(["1"] * n)
    elif any(group.season_long):
        names.append(board_key)
        expiries.append(0)
        season_long = " ".join(["1" if counts else "0" for counts in group.season_long])
    else:
        season_long = " ".join(["0"] * n)
    counted_days = (
        group.days
        if group.daily is None
        else [day for day, counts in zip(group.days, group.daily, strict=True) if counts]
    )
    day_index: dict[date, str] = {}
    for day in dict.fromkeys(counted_days):
        names.append(keys.daily_board(board_id=board.id, day=day))
        expiries.append(daily_board_expire_at(day=day, now=now))
        day_index[day] = str(len(names))
    if group.daily is None:
        daily = " ".join(map(day_index.__getitem__, group.days))
    else:
        daily = " ".join(
            [
                day_index[day] if counts else "0"
                for day, counts in zip(group.days, group.daily, strict=True)
            ]
        )
    wide = board.wide_codec
    key_args: list[str] = [
        keys.rank_events_outbox(board_id=board.id, topic=topic, partition=group.partition),
        keys.board_intact(board_id=board.id),
    ]
    events = _event_args(topic=topic, board=board, group=group)
    for key in names:
        key_args += [
            key,
            *([keys.board_index(board_key=key)] if wide else []),
            keys.rebuild_marker(board_key=key),
            keys.rebuild_pending(board_key=key),
            keys.rebuild_delta(board_key=key),
            keys.rebuild_done(board_key=key),
        ]
    if wide is not None:
        if group.tiebreakers is None:
            raise ValueError(
                f"board {board.id} ranks by tie-break columns: results need their values"
            )
        wide_head: list[str | int] = [
            group.partition,
            min(group.offsets),
            handled_offset,
            *wide_spec_args(board),
            len(names),
        ]
        wide_columns: list[str | int] = [
            n,
            _joined(group.players),
            " ".join(
                wide.keys_of(points=group.points, tiebreakers=group.tiebreakers, ticks=group.ticks)
            ),
            _joined(group.xids),
            season_long,
            daily,
        ]
        return names, key_args, [*wide_head, *expiries, *wide_columns, *events]
    codec = board.codec
    head: list[str | int] = [
        group.partition,
        min(group.offsets),
        handled_offset,
        board.rule,
        board.order,
        codec.time_bits,
        codec.max_points,
        len(names),
    ]
    columns: list[str | int] = [
        n,
        _joined(group.players),
        _joined(group.points),
        _joined(group.ticks),
        _joined(group.xids),
        season_long,
        daily,
    ]
    return names, key_args, [*head, *expiries, *columns, *events]


def wide_spec_args(board: BoardRef) -> list[str | int]:
    """A board's wide spec as the wide scripts take it (common.lua): rule, orders, tick_digits."""
    wide = board.wide_codec
    assert wide is not None
    orders = "".join("a" if ascending else "d" for ascending in wide.ascending)
    return [board.rule, orders, wide.tick_digits]


def board_groups_apply(
    *,
    topic: str,
    groups: Sequence[CountedGroup],
    handled_offsets: Mapping[int, int],
    boards: Mapping[int, BoardRef],
    outboxes_owed: Collection[tuple[int, int]] = (),
) -> BoardsApplied:
    """Put results on their boards (season-long and daily), exactly once per Kafka offset.

    ``outboxes_owed``: (partition, board) pairs of the batch with nothing to apply now (every
    result of theirs voided, banned or no longer the latest since a crashed attempt applied
    it): their outboxes are read whole, as a covered call's are, so the events that attempt
    wrote and never published go out now, not whenever that board and partition next see a
    redelivery.

    ``handled_offsets`` maps each partition in the batch to the highest offset the caller has
    dealt with (applied, rejected or found to be a duplicate). One script call per partition and
    board (``groups``: one each), all pipelined: each checks the board's applied-offset
    watermark for the partition, writes the board and moves its watermark atomically, touching
    keys of that board's slot only (docs/ingestion.md). The script alone decides what is
    already on the board: a call whose lowest offset its watermark covers writes nothing and
    returns the watermark; its offsets at or below it are dropped (``already_applied``) and the
    rest sent again.
    """
    client = get_board_redis()
    plain_script = get_script(client, "apply_results")
    wide_script = get_script(client, "wide_apply")
    pending = [group for group in groups if len(group)]
    now = datetime.now(UTC)
    late = _late_weeks(pending, today=now.date())
    applied = 0
    already = 0
    overflowed: list[str] = []
    events: list[OutboxEntry] = []
    # Outboxes to read whole: some of their offsets were covered, or nothing was left to apply.
    leftovers: set[str] = {
        keys.rank_events_outbox(board_id=board_id, topic=topic, partition=partition)
        for partition, board_id in outboxes_owed
        if boards[board_id].rank_events
    }
    while pending:
        pending.sort(key=lambda group: (group.partition, group.board_id))
        group_names: list[list[str]] = []
        calls: list[ScriptCall] = []
        for group in pending:
            names, key_args, args = _script_args(
                topic=topic,
                board=boards[group.board_id],
                group=group,
                handled_offset=handled_offsets[group.partition],
                now=now,
            )
            group_names.append(names)
            watermark = keys.ingest_applied_offsets(board_id=group.board_id, topic=topic)
            script = wide_script if boards[group.board_id].tiebreaks else plain_script
            calls.append(ScriptCall(script=script, keys=[watermark, *key_args], args=args))
        # Each call touches one board's slot; a cluster pipeline sends them grouped per node.
        replies = scripts_pipelined(client, calls)
        retry: list[CountedGroup] = []
        for group, names, call, reply in zip(pending, group_names, calls, replies, strict=True):
            if int(reply[0]) == 1:
                applied += len(group)
                if reply[2]:
                    events.append(OutboxEntry(call.keys[1], reply[2].decode(), reply[3]))
                for item in reply[4:]:
                    group_index, member = item.decode().split(" ", 1)
                    overflowed.append(f"{names[int(group_index) - 1]} {member}")
                continue
            # Covered up to the watermark: a redelivery, a retry after a lost reply, or another
            # consumer (the partition moved during a rebalance) applied part of it. Whoever
            # applied it may not have published its events: the outbox holds them if so.
            leftovers.add(call.keys[1])
            remaining = group.above(int(reply[1]))
            already += len(group) - len(remaining)
            if len(remaining):
                retry.append(remaining)
        pending = retry
    if late:
        # After the writes, whether this call made them or found them made (a redelivery after
        # a crash between the two marks them then): the weekly build that takes a mark
        # rebuilds from daily boards that hold them.
        with client.pipeline(transaction=False) as pipe:
            for board_id, weeks in late.items():
                pipe.sadd(keys.weekly_late(board_id=board_id), *sorted(weeks))
            pipe.execute()
    if overflowed:
        logger.error(
            "cumulative points overflow the codec; results left off the board: %s", overflowed
        )
    if leftovers:
        events = outbox_entries_merge(events, rank_events_outbox_read(outboxes=sorted(leftovers)))
    return BoardsApplied(
        applied=applied,
        already_applied=already,
        overflowed=tuple(overflowed),
        events=tuple(events),
    )


def _late_weeks(groups: Sequence[CountedGroup], *, today: date) -> dict[int, set[str]]:
    """Per board, the ISO weeks before today's that these results write daily boards of, as
    ``2026-W41``: results played in a week the periodic build no longer rebuilds for certain.
    The previous week too on a Monday: that day's builds rebuild it, but a result applied after
    the last of them (or while the builds are not running) would otherwise never reach it.
    Rare past a Monday's first minutes: a backlog after an outage, a game server's queue
    flushed late, a replay."""
    year, week, _ = today.isocalendar()
    built = {(year, week)}
    late: dict[int, set[str]] = {}
    for group in groups:
        for day in set(group.days):
            iso = day.isocalendar()
            if (iso.year, iso.week) not in built and day < today:
                late.setdefault(group.board_id, set()).add(f"{iso.year:04d}-W{iso.week:02d}")
    return late


def board_results_apply(
    *,
    topic: str,
    results: Sequence[CountedResult],
    handled_offsets: Mapping[int, int],
    boards: Mapping[int, BoardRef],
) -> BoardsApplied:
    """``board_groups_apply`` for results given as rows."""
    return board_groups_apply(
        topic=topic,
        groups=counted_groups(results),
        handled_offsets=handled_offsets,
        boards=boards,
    )


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
