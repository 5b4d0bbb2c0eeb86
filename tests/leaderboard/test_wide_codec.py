"""The wide-key codec: byte order is the ranking order, exact at every width, loud out of range."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leaderboard.codec import TIEBREAK_VALUE_MAX, CodecError, WideKeyCodec

VALUE = st.integers(min_value=0, max_value=TIEBREAK_VALUE_MAX)
EDGES = [0, 1, 2, TIEBREAK_VALUE_MAX - 1, TIEBREAK_VALUE_MAX]


def reference(codec: WideKeyCodec, points: int, tiebreakers: tuple[int, ...], ticks: int):
    """The contract's order as a tuple that sorts best first."""
    values = (points, *tiebreakers)
    return (
        *(v if asc else -v for v, asc in zip(values, codec.ascending, strict=True)),
        ticks,
    )


ORDERS = list(itertools.product([False, True], repeat=3))


@pytest.mark.parametrize("ascending", ORDERS)
def test_every_edge_combination_sorts_as_the_reference(ascending: tuple[bool, ...]) -> None:
    codec = WideKeyCodec(ascending=ascending, time_bits=32)
    items = [
        (p, (a, b), t)
        for p, a, b in itertools.product(EDGES, repeat=3)
        for t in (0, 1, codec.max_ticks)
    ]
    by_key = sorted(
        items, key=lambda i: codec.encode(points=i[0], tiebreakers=i[1], elapsed_ticks=i[2])
    )
    by_reference = sorted(items, key=lambda i: reference(codec, *i))
    assert by_key == by_reference
    keys = {codec.encode(points=p, tiebreakers=t, elapsed_ticks=k) for p, t, k in items}
    assert len(keys) == len(items), "two different keys collided"


@given(
    ascending=st.lists(st.booleans(), min_size=2, max_size=4).map(tuple),
    rows=st.lists(st.tuples(VALUE, VALUE, VALUE, VALUE, st.integers(0, (1 << 37) - 1)), min_size=2),
)
def test_keys_order_and_round_trip_like_the_reference(ascending, rows) -> None:
    codec = WideKeyCodec(ascending=ascending, time_bits=37)
    n = len(ascending) - 1
    items = [(r[0], tuple(r[1 : 1 + n]), r[4]) for r in rows]
    encoded = [codec.encode(points=p, tiebreakers=t, elapsed_ticks=k) for p, t, k in items]
    assert all(len(k) == codec.key_length for k in encoded)
    for key, (points, tiebreakers, ticks) in zip(encoded, items, strict=True):
        decoded = codec.decode(key)
        assert (decoded.points, decoded.tiebreakers, decoded.elapsed_ticks) == (
            points,
            tiebreakers,
            ticks,
        )
    order = sorted(range(len(items)), key=encoded.__getitem__)
    reference_order = sorted(range(len(items)), key=lambda i: reference(codec, *items[i]))
    assert [reference(codec, *items[i]) for i in order] == [
        reference(codec, *items[i]) for i in reference_order
    ]


def test_members_split_back_into_key_and_player() -> None:
    codec = WideKeyCodec(ascending=(False, False, True), time_bits=23)
    key = codec.encode(
        points=TIEBREAK_VALUE_MAX, tiebreakers=(0, TIEBREAK_VALUE_MAX), elapsed_ticks=5
    )
    member = codec.member(key=key, player_id=9_223_372_036_854_775_807)
    assert codec.member_split(member) == (key, 9_223_372_036_854_775_807)
    assert codec.member_split(member.encode()) == (key, 9_223_372_036_854_775_807)


@pytest.mark.parametrize(
    ("points", "tiebreakers", "ticks", "message"),
    [
        (TIEBREAK_VALUE_MAX + 1, (0, 0), 0, "points"),
        (-1, (0, 0), 0, "points"),
        (0, (TIEBREAK_VALUE_MAX + 1, 0), 0, "tie-break column 1"),
        (0, (0, -1), 0, "tie-break column 2"),
        (0, (0,), 0, "expected 2"),
        (0, (0, 0), 1 << 23, "elapsed_ticks"),
        (0, (True, 0), 0, "integer"),
    ],
)
def test_out_of_range_raises_instead_of_wrapping(points, tiebreakers, ticks, message) -> None:
    codec = WideKeyCodec(ascending=(False, False, True), time_bits=23)
    with pytest.raises(CodecError, match=message):
        codec.encode(points=points, tiebreakers=tiebreakers, elapsed_ticks=ticks)


@pytest.mark.parametrize("bad", ["", "zz" * 20, "ffffffff" * 3 + "000000", "0" * 31])
def test_malformed_keys_raise(bad: str) -> None:
    codec = WideKeyCodec(ascending=(False, False, True), time_bits=23)
    with pytest.raises(CodecError):
        codec.decode(bad)


def test_column_counts_outside_one_to_three_are_refused() -> None:
    with pytest.raises(CodecError, match="tie-break columns"):
        WideKeyCodec(ascending=(False,), time_bits=23)
    with pytest.raises(CodecError, match="tie-break columns"):
        WideKeyCodec(ascending=(False,) * 5, time_bits=23)


@given(
    ascending=st.lists(st.booleans(), min_size=2, max_size=4).map(tuple),
    rows=st.lists(st.tuples(VALUE, VALUE, VALUE, VALUE, st.integers(0, (1 << 23) - 1))),
)
def test_the_ingestion_paths_keys_are_the_checked_encoders(ascending, rows) -> None:
    codec = WideKeyCodec(ascending=ascending, time_bits=23)
    n = len(ascending) - 1
    assert codec.keys_of(
        points=[r[0] for r in rows], tiebreakers=[list(r[1 : 1 + n]) for r in rows],
        ticks=[r[4] for r in rows],
    ) == [
        codec.encode(points=r[0], tiebreakers=r[1 : 1 + n], elapsed_ticks=r[4]) for r in rows
    ]  # fmt: skip
