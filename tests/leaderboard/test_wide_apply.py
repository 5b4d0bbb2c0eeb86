"""wide_apply.lua through board_results_apply: boards with tie-break columns, against the real
Redis (no database), checked against a reference sort of the whole key."""

from __future__ import annotations

import random
from datetime import UTC, date, datetime

import pytest

from leaderboard import keys
from leaderboard.codec import TIEBREAK_VALUE_MAX
from leaderboard.models import BoardOrder, ScoringRule, TiebreakColumn, board_codec
from leaderboard.selectors.boards import BoardRef
from leaderboard.services import CountedResult, board_results_apply
from seasons.selectors import SeasonRef

TOPIC = "wide-apply-test"
DAY = date(2026, 10, 2)
BOARD = 78
MAX = TIEBREAK_VALUE_MAX


def wide_board(
    *, rule: str, order: str = BoardOrder.DESC, columns: tuple[str, ...] = ("desc", "asc")
) -> BoardRef:
    season = SeasonRef(
        id=7,
        name="S7",
        status="active",
        starts_at=datetime(2026, 10, 1, tzinfo=UTC),
        ends_at=datetime(2026, 12, 30, tzinfo=UTC),
    )
    codec = board_codec(time_bits=23, resolution_seconds=1, ascending=order == BoardOrder.ASC)
    return BoardRef(
        id=BOARD,
        slug="kills",
        name="Kills",
        order=order,
        rule=rule,
        codec=codec,
        season=season,
        tiebreaks=tuple(TiebreakColumn(f"c{i}", o) for i, o in enumerate(columns)),
    )


def result(offset: int, player: int, values: tuple[int, ...], ticks: int, xid: int = 500):
    return CountedResult(
        partition=0,
        offset=offset,
        board_id=BOARD,
        player_id=player,
        points=values[0],
        ticks=ticks,
        day=DAY,
        xid=xid,
        tiebreakers=values[1:],
    )


def apply(board: BoardRef, results: list[CountedResult]):
    return board_results_apply(
        topic=TOPIC,
        results=results,
        handled_offsets={0: max(r.offset for r in results)},
        boards={board.id: board},
    )


def reference_key(board: BoardRef, values: tuple[int, ...], ticks: int) -> tuple[int, ...]:
    wide = board.wide_codec
    assert wide is not None
    return (*(v if a else -v for v, a in zip(values, wide.ascending, strict=True)), ticks)


def expected_values(board: BoardRef, results: list[CountedResult]) -> dict[int, tuple]:
    """Each player's (values, ticks) under the board's rule, computed in Python."""
    held: dict[int, tuple[tuple[int, ...], int]] = {}
    for r in results:
        values, ticks = (r.points, *r.tiebreakers), r.ticks
        old = held.get(r.player_id)
        if board.rule == ScoringRule.CUMULATIVE and old is not None:
            sums = tuple(a + b for a, b in zip(old[0], values, strict=True))
            if max(sums) > MAX:
                continue  # left out whole, nothing clamped
            held[r.player_id] = (sums, max(old[1], ticks))
        elif board.rule == ScoringRule.BEST and old is not None:
            if reference_key(board, values, ticks) < reference_key(board, *old):
                held[r.player_id] = (values, ticks)
        else:
            held[r.player_id] = (values, ticks)
    return held


def board_read(board_redis, board: BoardRef, key: str) -> list[tuple[int, tuple, int]]:
    """The board's members in Redis's order, decoded: (player, values, ticks)."""
    wide = board.wide_codec
    assert wide is not None
    rows = []
    for member in board_redis.zrange(key, 0, -1):
        wide_key, player = wide.member_split(member)
        decoded = wide.decode(wide_key)
        rows.append((player, (decoded.points, *decoded.tiebreakers), decoded.elapsed_ticks))
        assert board_redis.hget(keys.board_index(board_key=key), str(player)).decode() == wide_key
    assert board_redis.hlen(keys.board_index(board_key=key)) == len(rows)
    return rows


def expected_read(board: BoardRef, held: dict[int, tuple]) -> list[tuple[int, tuple, int]]:
    # Among equal keys Redis orders members by their bytes: the player id as text.
    ordered = sorted(held.items(), key=lambda kv: (reference_key(board, *kv[1]), str(kv[0])))
    return [(player, values, ticks) for player, (values, ticks) in ordered]


CASES = [
    (rule, order, columns)
    for rule in (ScoringRule.BEST, ScoringRule.CUMULATIVE, ScoringRule.LATEST)
    for order in (BoardOrder.DESC, BoardOrder.ASC)
    for columns in (("desc",), ("desc", "asc"), ("asc", "desc", "asc"))
]


@pytest.mark.parametrize(("rule", "order", "columns"), CASES)
def test_every_rule_and_order_matches_the_reference_sort(board_redis, rule, order, columns) -> None:
    board = wide_board(rule=rule, order=order, columns=columns)
    rng = random.Random(f"{rule}{order}{columns}")
    # Small ranges and the maxima: ties on every column, and values far past 53 bits together.
    pool = (
        [0, 1, 2, MAX - 1, MAX] if rule != ScoringRule.CUMULATIVE else [0, 1, 2, MAX // 8, MAX // 3]
    )
    results = [
        result(
            offset,
            rng.randrange(1, 25),
            tuple(rng.choice(pool) for _ in range(1 + len(columns))),
            rng.choice([5, 6, 7]) if rule != ScoringRule.LATEST else offset,
            # One storing transaction each: a batch's results of one player and transaction are
            # summed before the check, so a sum past the maximum would leave out all of them.
            xid=1000 + offset,
        )
        for offset in range(300)
    ]
    start = 0
    while start < len(results):
        size = rng.randrange(1, 40)
        batch = results[start : start + size]
        apply(board, batch)
        if rng.random() < 0.3:
            # A redelivery of the same offsets: the watermark drops every one of them.
            again = apply(board, batch)
            assert (again.applied, again.already_applied) == (0, len(batch))
        start += size

    expected = expected_read(board, expected_values(board, results))
    assert board_read(board_redis, board, keys.board(board_id=BOARD)) == expected
    assert board_read(board_redis, board, keys.daily_board(board_id=BOARD, day=DAY)) == expected


def test_cumulative_sum_past_the_maximum_is_left_out_and_reported(board_redis) -> None:
    board = wide_board(rule=ScoringRule.CUMULATIVE)
    apply(board, [result(0, 1, (10, MAX, 3), 5)])
    outcome = apply(board, [result(1, 1, (10, 1, 3), 6)])
    board_key = keys.board(board_id=BOARD)
    assert f"{board_key} 1" in outcome.overflowed
    assert board_read(board_redis, board, board_key) == [(1, (10, MAX, 3), 5)]


def test_a_caller_of_another_layout_fails_loudly(board_redis) -> None:
    from redis.exceptions import ResponseError

    from leaderboard.scripts import get_script

    board = wide_board(rule=ScoringRule.BEST)
    watermark = keys.ingest_applied_offsets(board_id=BOARD, topic=TOPIC)
    live = keys.board(board_id=BOARD)
    group = [
        live,
        keys.board_index(board_key=live),
        keys.rebuild_marker(board_key=live),
        keys.rebuild_pending(board_key=live),
        keys.rebuild_delta(board_key=live),
        keys.rebuild_done(board_key=live),
    ]
    script = get_script(board_redis, "wide_apply")
    wide = board.wide_codec
    assert wide is not None
    key = wide.encode(points=10, tiebreakers=(2, 3), elapsed_ticks=5)
    # The previous layout (values and ticks apart: one column more) and a key of another width.
    for columns in (["1", "10,2,3", "5", "500", "1", "0"], ["1", key[:-1], "500", "1", "0"]):
        with pytest.raises(ResponseError, match="wide_apply"):
            script(
                keys=[watermark, *group],
                args=[0, 0, 0, "best", "dda", wide.tick_digits, 1, 0, 1, *columns],
            )
    assert board_redis.hget(watermark, "0") is None
    assert board_redis.zcard(live) == 0


@pytest.mark.parametrize("order", [BoardOrder.DESC, BoardOrder.ASC])
def test_latest_keeps_a_later_result_applied_before_an_older_one(board_redis, order) -> None:
    """One player's results on two partitions: the older was decided the latest before the
    newer was stored, and its apply comes after the newer's. The board keeps the newer, as
    PostgreSQL (the rebuild) does."""
    board = wide_board(rule=ScoringRule.LATEST, order=order)
    apply(board, [result(1, 5, (20, 3, 4), ticks=200)])
    apply(board, [result(2, 5, (50, 9, 9), ticks=100)])
    key = keys.board(board_id=BOARD)
    assert board_read(board_redis, board, key) == [(5, (20, 3, 4), 200)]
    # A result of the same tick or later still replaces it.
    apply(board, [result(3, 5, (7, 1, 1), ticks=200)])
    assert board_read(board_redis, board, key) == [(5, (7, 1, 1), 200)]
