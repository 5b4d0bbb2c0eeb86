"""The codec against a real Redis sorted set: Redis's own double arithmetic decides the order."""

from __future__ import annotations

from datetime import timedelta

from leaderboard import keys
from leaderboard.codec import ScoreCodec


def test_zset_round_trip_orders_by_points_then_earliest(board_redis) -> None:
    codec = ScoreCodec.reference()
    key = keys.board(board_id=7)
    entries = {
        # player: (points, elapsed seconds)
        b"1": (1518, 100),
        b"2": (1518, 50),  # same points, earlier: ranks above player 1
        b"3": (codec.max_points, codec.max_ticks),  # the top, reached at the last second
        b"4": (0, 0),
        b"5": (codec.max_points, codec.max_ticks - 1),  # one second earlier than player 3
    }
    board_redis.zadd(
        key,
        {
            member: codec.to_redis(codec.encode(points=p, elapsed_ticks=t))
            for member, (p, t) in entries.items()
        },
    )
    ranked = board_redis.zrevrange(key, 0, -1, withscores=True)
    assert [member for member, _ in ranked] == [b"5", b"3", b"2", b"1", b"4"]
    for member, score in ranked:
        decoded = codec.decode(score)
        assert (decoded.points, decoded.elapsed_ticks) == entries[member]
    # ZSCORE's string form decodes too.
    raw = board_redis.execute_command("ZSCORE", key, b"3", NEVER_DECODE=True)
    assert codec.decode(raw).points == codec.max_points


def test_ties_never_fall_back_to_member_order(board_redis) -> None:
    codec = ScoreCodec.for_window(duration=timedelta(days=90))
    key = keys.board(board_id=8)
    # Member "a" sorts lexically after "9"; the earlier one must still win.
    board_redis.zadd(key, {b"9": codec.encode(points=10, elapsed_ticks=5)})
    board_redis.zadd(key, {b"a": codec.encode(points=10, elapsed_ticks=4)})
    assert board_redis.zrevrange(key, 0, -1) == [b"a", b"9"]
    assert board_redis.zrevrank(key, b"a") == 0


def test_every_key_of_a_board_shares_its_hash_tag(settings) -> None:
    from datetime import date

    settings.LEADERBOARD_KEY_PREFIX = "lb"
    assert keys.board(board_id=12) == "lb:{b12}"
    assert keys.daily_board(board_id=12, day=date(2026, 10, 2)) == "lb:{b12}:d:2026-10-02"
    assert keys.weekly_board(board_id=12, iso_year=2026, iso_week=3) == "lb:{b12}:w:2026-W03"
    assert keys.rebuild_temp(board_key=keys.board(board_id=12)) == "lb:{b12}:rebuild"
    assert keys.top_snapshot(board_id=12) == "lb:{b12}:top"
    # The exactly-once watermark lives in the board's slot: one script touches one slot.
    assert keys.ingest_applied_offsets(board_id=12, topic="t") == "lb:{b12}:applied:t"
