"""apply_results.lua through board_results_apply, against the real Redis (no database)."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from leaderboard import keys
from leaderboard.models import BoardOrder, ScoringRule, board_codec
from leaderboard.selectors.boards import BoardRef
from leaderboard.services import CountedResult, board_results_apply
from seasons.selectors import SeasonRef

TOPIC = "apply-test"
DAY = date(2026, 10, 2)


BOARD = 77


def _season(rule: str = ScoringRule.CUMULATIVE, order: str = BoardOrder.DESC) -> BoardRef:
    """A board (no database row: the script and the service need only its spec)."""
    season = SeasonRef(
        id=7,
        name="S7",
        status="active",
        starts_at=datetime(2026, 10, 1, tzinfo=UTC),
        ends_at=datetime(2026, 12, 30, tzinfo=UTC),
    )
    codec = board_codec(time_bits=23, resolution_seconds=1, ascending=order == BoardOrder.ASC)
    return BoardRef(
        id=BOARD, slug="main", name="Main", order=order, rule=rule, codec=codec, season=season
    )


def _result(offset: int, *, player: int = 1, points: int = 10, xid: int = 500) -> CountedResult:
    return CountedResult(
        partition=0,
        offset=offset,
        board_id=BOARD,
        player_id=player,
        points=points,
        ticks=86400 + offset,
        day=DAY,
        xid=xid,
    )


def _apply(season: BoardRef, results: list[CountedResult]):
    return board_results_apply(
        topic=TOPIC,
        results=results,
        handled_offsets={0: max(r.offset for r in results)},
        boards={season.id: season},
    )


def _points(board_redis, season: BoardRef, key: str, player: int = 1) -> int:
    return season.codec.decode(int(board_redis.zscore(key, str(player)))).points


def test_offsets_already_applied_by_another_owner_are_dropped(board_redis) -> None:
    season = _season()
    board = keys.board(board_id=BOARD)
    first = _apply(season, [_result(o) for o in range(5, 11)])
    assert (first.applied, first.already_applied) == (6, 0)

    # A former owner of the partition finishing an overlapping batch late.
    late = _apply(season, [_result(o) for o in range(8, 13)])

    assert (late.applied, late.already_applied) == (2, 3)
    assert _points(board_redis, season, board) == 80
    assert _points(board_redis, season, keys.daily_board(board_id=BOARD, day=DAY)) == 80
    assert board_redis.hget(keys.ingest_applied_offsets(board_id=BOARD, topic=TOPIC), "0") == b"12"


@pytest.mark.parametrize(
    ("rule", "points", "ticks"),
    [
        # Equal points reached later (offset 4) never replace the earlier ones.
        (ScoringRule.BEST, 30, 86400 + 2),
        (ScoringRule.CUMULATIVE, 90, 86400 + 4),
    ],
)
def test_a_batch_collapses_per_player_under_each_rule(board_redis, rule, points, ticks) -> None:
    season = _season(rule)
    batch = [_result(1, points=10), _result(2, points=30), _result(3, points=20)]
    _apply(season, [*batch, _result(4, points=30)])

    decoded = season.codec.decode(int(board_redis.zscore(keys.board(board_id=BOARD), "1")))
    assert (decoded.points, decoded.elapsed_ticks) == (points, ticks)


def test_writes_during_a_pending_rebuild_are_queued(board_redis) -> None:
    season = _season()
    board = keys.board(board_id=BOARD)
    board_redis.set(keys.rebuild_marker(board_key=board), "pending")

    _apply(season, [_result(1, points=10, xid=600), _result(2, player=2, points=5, xid=600)])

    pending = board_redis.lrange(keys.rebuild_pending(board_key=board), 0, -1)
    assert sorted(pending) == [b"600 1 10 86401", b"600 2 5 86402"]
    daily = keys.daily_board(board_id=BOARD, day=DAY)
    assert board_redis.llen(keys.rebuild_pending(board_key=daily)) == 0


def test_writes_invisible_to_the_rebuild_snapshot_go_to_the_delta(board_redis) -> None:
    season = _season(ScoringRule.BEST)
    board = keys.board(board_id=BOARD)
    board_redis.set(keys.rebuild_marker(board_key=board), "100:200:150")
    board_redis.zadd(board, {"1": season.codec.encode(points=999, elapsed_ticks=0)})

    # xid 90 committed before the snapshot (the rebuild counts it); 150 was running; 250 is later.
    _apply(
        season,
        [
            _result(1, player=1, points=5, xid=150),  # lower than the live board: still a delta
            _result(2, player=2, points=7, xid=90),
            _result(3, player=3, points=8, xid=250),
        ],
    )

    delta = keys.rebuild_delta(board_key=board)
    assert {int(m) for m in board_redis.zrange(delta, 0, -1)} == {1, 3}
    assert season.codec.decode(int(board_redis.zscore(delta, "1"))).points == 5


def test_a_cumulative_overflow_is_left_out_not_clamped(board_redis) -> None:
    season = _season()
    board = keys.board(board_id=BOARD)
    near_max = season.codec.encode(points=season.codec.max_points - 5, elapsed_ticks=0)
    board_redis.zadd(board, {"1": near_max})

    outcome = _apply(season, [_result(1, player=1, points=10), _result(2, player=2, points=3)])

    assert outcome.overflowed == (f"{board} 1",)
    assert int(board_redis.zscore(board, "1")) == near_max
    assert _points(board_redis, season, board, player=2) == 3


@pytest.mark.parametrize(
    "layout",
    [
        # The layout before results were packed into one argument: five arguments per result.
        "one-argument-per-field",
        # The layout before results went as columns: one packed entry string.
        "packed-entries",
        # Columns of different lengths (the daily one is short).
        "short-column",
        # A result naming a key group the call does not have.
        "unknown-key-group",
    ],
)
def test_a_caller_of_another_argument_layout_fails_and_moves_nothing(board_redis, layout) -> None:
    """Regression: a 1M bench run whose process had imported the Python of one version and
    later read apply_results.lua of the next (packed arguments) applied nothing, moved the
    watermark and returned success: its results were stored but never reached the board."""
    from redis.exceptions import ResponseError

    from leaderboard.scripts import get_script

    season = _season(ScoringRule.BEST)
    board = keys.board(board_id=BOARD)
    watermark = keys.ingest_applied_offsets(board_id=BOARD, topic=TOPIC)
    board_keys = [
        board,
        keys.rebuild_marker(board_key=board),
        keys.rebuild_pending(board_key=board),
        keys.rebuild_delta(board_key=board),
        keys.rebuild_done(board_key=board),
    ]
    # partition, lowest offset, handled offset, the spec, one key group and its expiry.
    codec = season.codec
    head: list[str | int] = [0, 5, 6, "best", "desc", codec.time_bits, codec.max_points, 1, 0]
    args: list[str | int]
    if layout == "one-argument-per-field":
        args = [*head, 1, 42, 100, 7, 500, 1, 43, 90, 8, 500]
    elif layout == "packed-entries":
        args = [*head, "1 42 100 7 500;1 43 90 8 500"]
    elif layout == "short-column":
        args = [*head, 2, "42 43", "100 90", "7 8", "500 500", "1 1", "1"]
    else:
        args = [*head, 2, "42 43", "100 90", "7 8", "500 500", "1 2", "0 0"]
    script = get_script(board_redis, "apply_results")

    with pytest.raises(ResponseError, match="apply_results"):
        script(keys=[watermark, *board_keys], args=args)

    assert board_redis.zcard(board) == 0
    assert board_redis.hget(watermark, "0") is None


def test_every_script_is_read_when_the_process_starts() -> None:
    """The Lua a process runs is the Lua beside the code it imported, not what the files hold
    when a script is first called (see the regression test above)."""
    from leaderboard import scripts

    on_disk = {p.stem for p in scripts.LUA_DIR.glob("*.lua")} - {"common"}
    assert set(scripts._SOURCES) == on_disk
    assert "apply_results" in on_disk


@pytest.mark.parametrize("rule", [ScoringRule.BEST, ScoringRule.CUMULATIVE])
def test_a_batch_larger_than_one_zadd_lands_whole_on_both_boards(board_redis, rule) -> None:
    # 5,000 players in one call: the script writes each board in several ZADDs of 500 members.
    season = _season(rule)
    results = [_result(n, player=n + 1, points=n % 997) for n in range(5000)]
    # A second result of every tenth player in the same call: merged under the rule.
    results += [_result(5000 + n, player=n + 1, points=998) for n in range(0, 5000, 10)]
    outcome = _apply(season, results)
    assert outcome.applied == len(results)
    expected: dict[int, tuple[int, int]] = {}  # player -> (points, ticks)
    for r in results:
        old = expected.get(r.player_id)
        if old is None:
            expected[r.player_id] = (r.points, r.ticks)
        elif rule == ScoringRule.BEST:
            # Higher points win; equal points keep the earlier time.
            if (r.points, -r.ticks) > (old[0], -old[1]):
                expected[r.player_id] = (r.points, r.ticks)
        else:
            expected[r.player_id] = (old[0] + r.points, max(old[1], r.ticks))
    want = {
        str(player).encode(): season.codec.encode(points=points, elapsed_ticks=ticks)
        for player, (points, ticks) in expected.items()
    }
    for key in (
        keys.board(board_id=BOARD),
        keys.daily_board(board_id=BOARD, day=DAY),
    ):
        got = {m: int(s) for m, s in board_redis.zrange(key, 0, -1, withscores=True)}
        assert got == want


def test_the_match_ids_column_is_each_uuid_canonical_and_dash_for_none() -> None:
    from uuid import UUID, uuid4

    from leaderboard.services.apply import _uuid_column

    ids = [uuid4() for _ in range(50)] + [UUID(int=0), UUID(int=2**128 - 1)]
    assert _uuid_column(ids) == " ".join(str(m) for m in ids)
    assert _uuid_column([ids[0], None, ids[1]]) == f"{ids[0]} - {ids[1]}"
    assert _uuid_column([]) == ""
