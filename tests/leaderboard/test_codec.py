"""The score codec: exhaustive on small splits, every boundary of real ones, and properties."""

from __future__ import annotations

import itertools
import struct
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leaderboard.codec import MAX_TOTAL_BITS, CodecError, ScoreCodec

REFERENCE = ScoreCodec.reference()


def through_double(value: int) -> float:
    """What Redis stores: an IEEE-754 double, packed and unpacked to be sure."""
    return struct.unpack("<d", struct.pack("<d", float(value)))[0]


def ranks_higher(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """The required order: more points first; equal points, the earlier one first."""
    (points_a, ticks_a), (points_b, ticks_b) = a, b
    return points_a > points_b or (points_a == points_b and ticks_a < ticks_b)


# --- exhaustive on small splits ---------------------------------------------------------------


@pytest.mark.parametrize(("points_bits", "time_bits"), [(1, 1), (3, 2), (4, 3), (2, 5)])
def test_every_pair_orders_and_round_trips(points_bits: int, time_bits: int) -> None:
    codec = ScoreCodec(points_bits, time_bits)
    pairs = list(itertools.product(range(codec.max_points + 1), range(codec.max_ticks + 1)))
    encoded = {pair: codec.encode(points=pair[0], elapsed_ticks=pair[1]) for pair in pairs}

    assert len(set(encoded.values())) == len(pairs), "two different pairs collided"
    for pair, score in encoded.items():
        decoded = codec.decode(through_double(score))
        assert (decoded.points, decoded.elapsed_ticks) == pair
    for a, b in itertools.permutations(pairs, 2):
        assert (encoded[a] > encoded[b]) == ranks_higher(a, b), (a, b)


# --- the reference split ------------------------------------------------------------------------


def test_reference_split_is_21_points_bits_and_32_time_bits() -> None:
    assert (REFERENCE.points_bits, REFERENCE.time_bits) == (21, 32)
    assert REFERENCE.max_points == 2_097_151
    assert REFERENCE.max_ticks == 2**32 - 1
    assert REFERENCE.max_score == 2**53 - 1


@pytest.mark.parametrize(
    ("points", "ticks"),
    [
        (0, 0),
        (0, 2**32 - 1),
        (2_097_151, 0),
        (2_097_151, 2**32 - 1),
        (2_097_150, 0),
        (1, 2**32 - 1),
        (1518, 12_345),
    ],
)
def test_reference_boundaries_survive_the_double_round_trip(points: int, ticks: int) -> None:
    score = REFERENCE.encode(points=points, elapsed_ticks=ticks)
    assert score <= 2**53 - 1
    assert through_double(score) == score  # exact in a double
    decoded = REFERENCE.decode(through_double(score))
    assert (decoded.points, decoded.elapsed_ticks) == (points, ticks)
    # And in the string forms Redis may answer with.
    assert REFERENCE.decode(str(score)).points == points
    assert REFERENCE.decode(repr(through_double(score))).points == points
    assert REFERENCE.decode(str(score).encode()).points == points


def test_max_points_at_max_time_is_the_largest_53_bit_value_below_the_next_point() -> None:
    top_late = REFERENCE.encode(points=REFERENCE.max_points, elapsed_ticks=REFERENCE.max_ticks)
    top_early = REFERENCE.encode(points=REFERENCE.max_points, elapsed_ticks=0)
    below = REFERENCE.encode(points=REFERENCE.max_points - 1, elapsed_ticks=0)
    assert top_early == 2**53 - 1
    assert below < top_late < top_early
    assert through_double(below) < through_double(top_late) < through_double(top_early)


def test_adjacent_points_and_ticks_stay_distinct_in_doubles_at_the_top() -> None:
    # Beyond 53 bits neighbours would collapse into one double; here they never may.
    for ticks in (0, 1, REFERENCE.max_ticks - 1, REFERENCE.max_ticks):
        a = REFERENCE.encode(points=REFERENCE.max_points, elapsed_ticks=ticks)
        assert through_double(a) != through_double(a - 1)


def test_earlier_wins_ties_and_more_points_always_beat_earlier_time() -> None:
    early = REFERENCE.encode(points=500, elapsed_ticks=10)
    late = REFERENCE.encode(points=500, elapsed_ticks=11)
    more_but_latest = REFERENCE.encode(points=501, elapsed_ticks=REFERENCE.max_ticks)
    assert early > late
    assert more_but_latest > early


# --- out of range: errors, never clamping ------------------------------------------------------


@pytest.mark.parametrize(
    ("points", "ticks", "message"),
    [
        (2_097_152, 0, "exceed"),
        (-1, 0, ">= 0"),
        (0, -1, "outside"),
        (0, 2**32, "outside"),
        (True, 0, "integer"),
        (1.0, 0, "integer"),
        ("5", 0, "integer"),
        (5, 1.5, "integer"),
    ],
)
def test_out_of_range_or_mistyped_values_raise(points, ticks, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        REFERENCE.encode(points=points, elapsed_ticks=ticks)


def test_splits_wider_than_53_bits_are_refused() -> None:
    with pytest.raises(CodecError, match="exceed 53"):
        ScoreCodec(22, 32)
    with pytest.raises(CodecError):
        ScoreCodec(0, 32)
    with pytest.raises(CodecError):
        ScoreCodec(21, 32, resolution_seconds=0)


@pytest.mark.parametrize(
    "score",
    [2.0**53, 2**53, -1, -1.0, 1.5, float("nan"), float("inf"), "abc", "1.25", True, None],
)
def test_decoding_garbage_raises(score) -> None:
    with pytest.raises(CodecError):
        REFERENCE.decode(score)


# --- elapsed time --------------------------------------------------------------------------------


def test_ticks_floor_to_the_resolution_and_reject_out_of_window() -> None:
    codec = ScoreCodec(30, 23, resolution_seconds=60)
    assert codec.ticks(timedelta(seconds=59.999)) == 0
    assert codec.ticks(timedelta(seconds=60)) == 1
    assert codec.ticks(timedelta(minutes=90, seconds=30)) == 90
    with pytest.raises(CodecError, match="before the season"):
        codec.ticks(timedelta(microseconds=-1))
    with pytest.raises(CodecError, match="exceeds"):
        codec.ticks(timedelta(seconds=60 * (codec.max_ticks + 1)))
    assert codec.ticks(timedelta(seconds=60 * codec.max_ticks + 59)) == codec.max_ticks


@given(
    elapsed_us=st.integers(min_value=0, max_value=(2**23) * 60 * 1_000_000 - 1),
    resolution=st.sampled_from([1, 7, 60, 3600]),
)
def test_ticks_are_the_floor_of_elapsed_over_the_resolution(
    elapsed_us: int, resolution: int
) -> None:
    # ticks() skips timedelta arithmetic (it runs once per ingested result): it must agree with it.
    codec = ScoreCodec(30, 23, resolution_seconds=resolution)
    elapsed = timedelta(microseconds=elapsed_us)
    expected = elapsed // timedelta(seconds=resolution)
    if expected > codec.max_ticks:
        with pytest.raises(CodecError, match="exceeds"):
            codec.ticks(elapsed)
    else:
        assert codec.ticks(elapsed) == expected


def test_encode_elapsed_matches_encode_of_ticks() -> None:
    codec = ScoreCodec.for_window(duration=timedelta(days=90))
    assert codec.encode_elapsed(points=7, elapsed=timedelta(seconds=3661)) == codec.encode(
        points=7, elapsed_ticks=3661
    )


# --- the split derived from the season ----------------------------------------------------------


def test_a_90_day_season_at_one_second_needs_23_time_bits() -> None:
    codec = ScoreCodec.for_window(duration=timedelta(days=90))
    assert codec.time_bits == 23
    assert codec.points_bits == 30
    # The last second of the season is still representable.
    assert codec.ticks(timedelta(days=90)) <= codec.max_ticks


def test_minute_resolution_trades_time_bits_for_points() -> None:
    seconds = ScoreCodec.for_window(duration=timedelta(days=365))
    minutes = ScoreCodec.for_window(duration=timedelta(days=365), resolution_seconds=60)
    assert minutes.points_bits > seconds.points_bits
    assert minutes.points_bits + minutes.time_bits == MAX_TOTAL_BITS


@pytest.mark.parametrize("exponent", [1, 10, 23, 32])
def test_window_of_exactly_a_power_of_two_seconds_fits_its_last_tick(exponent: int) -> None:
    duration = timedelta(seconds=2**exponent)
    codec = ScoreCodec.for_window(duration=duration)
    assert codec.time_bits == exponent + 1
    assert codec.ticks(duration) == 2**exponent
    one_less = ScoreCodec.for_window(duration=duration - timedelta(seconds=1))
    assert one_less.time_bits == exponent


def test_windows_that_leave_too_few_points_bits_are_refused() -> None:
    with pytest.raises(CodecError, match="coarser"):
        ScoreCodec.for_window(duration=timedelta(days=365 * 10_000))
    with pytest.raises(CodecError, match="positive"):
        ScoreCodec.for_window(duration=timedelta(0))


# --- properties ----------------------------------------------------------------------------------

codecs = st.builds(
    lambda days, resolution: ScoreCodec.for_window(
        duration=timedelta(days=days), resolution_seconds=resolution
    ),
    st.integers(min_value=1, max_value=3650),
    st.sampled_from([1, 5, 60, 3600]),
)


@st.composite
def codec_and_two_scores(draw):
    codec = draw(codecs)
    pair = st.tuples(
        st.integers(min_value=0, max_value=codec.max_points),
        st.integers(min_value=0, max_value=codec.max_ticks),
    )
    return codec, draw(pair), draw(pair)


@settings(max_examples=2000)
@given(codec_and_two_scores())
def test_encoding_preserves_the_required_order_through_doubles(case) -> None:
    codec, a, b = case
    score_a = through_double(codec.encode(points=a[0], elapsed_ticks=a[1]))
    score_b = through_double(codec.encode(points=b[0], elapsed_ticks=b[1]))
    if a == b:
        assert score_a == score_b
    else:
        assert (score_a > score_b) == ranks_higher(a, b)


@settings(max_examples=2000)
@given(codec_and_two_scores())
def test_decode_inverts_encode_through_doubles(case) -> None:
    codec, a, _ = case
    decoded = codec.decode(through_double(codec.encode(points=a[0], elapsed_ticks=a[1])))
    assert (decoded.points, decoded.elapsed_ticks) == a


@given(st.integers(min_value=1, max_value=52), st.integers(min_value=1, max_value=52))
def test_any_split_within_53_bits_is_accepted_and_any_wider_refused(p: int, t: int) -> None:
    if p + t <= MAX_TOTAL_BITS:
        codec = ScoreCodec(p, t)
        assert codec.max_score < 2**53
    else:
        with pytest.raises(CodecError):
            ScoreCodec(p, t)


@pytest.mark.parametrize("ascending", [False, True])
@given(st.lists(st.integers(0, 2**53 - 1), max_size=20))
def test_decoding_many_scores_agrees_with_decoding_each(ascending: bool, values: list[int]) -> None:
    """The batch decode of a cohort's or friends list's scores, against ``decode`` one by
    one, over every form Redis or a caller may hand a score in."""
    codec = ScoreCodec(21, 32, ascending=ascending)
    forms: list[int | float | str | bytes] = [str(v).encode() for v in values]
    forms += [f"{float(v)!r}".encode() for v in values]
    forms += [str(v) for v in values]
    forms += values
    assert codec.decode_points_many(forms) == [codec.decode(s).points for s in forms]


@pytest.mark.parametrize("score", [b"-1", str(2**53).encode(), b"nan", b"1e400"])
def test_decoding_many_scores_refuses_what_decoding_one_refuses(score: bytes) -> None:
    codec = ScoreCodec(21, 32)
    with pytest.raises(CodecError):
        codec.decode_points_many([b"5", score])
