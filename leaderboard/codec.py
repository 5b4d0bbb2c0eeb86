"""The composite score codec: points and time packed into one integer exact in a double.

Redis sorted-set scores are IEEE-754 doubles, exact for every integer up to 2**53. A score
packs ``points`` in the high bits and ``max_ticks - elapsed_ticks`` in the low bits, so that
of two equal point values the one reached earlier is numerically larger and ranks higher in
descending order. Never exceed 53 bits in total: past that, doubles round and two different
scores collide silently, which skews the whole board without any error. That is why every
out-of-range value raises ``CodecError`` instead of being clamped or wrapped.

The split is per season: the season's length and time resolution bound ``elapsed``, so the
time part takes just the bits it needs and the points part takes the rest. The reference
split is 21 bits of points and 32 bits of seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

# PostgreSQL BIGINT bounds the stored ids and points: the one bound every layer checks against.
BIGINT_MAX = (1 << 63) - 1
MAX_TOTAL_BITS = 53
REFERENCE_POINTS_BITS = 21
REFERENCE_TIME_BITS = 32
# Below this a season could not express a meaningful score range; choose a coarser resolution.
MIN_POINTS_BITS = 16


class CodecError(ValueError):
    """A value cannot be encoded or decoded without losing ordering or precision."""


@dataclass(frozen=True, slots=True)
class DecodedScore:
    points: int
    elapsed_ticks: int
    resolution_seconds: int

    @property
    def elapsed(self) -> timedelta:
        return timedelta(seconds=self.elapsed_ticks * self.resolution_seconds)


def _require_int(name: str, value: object) -> int:
    # bool is an int subclass; True points would be a bug upstream, not a score of 1.
    if isinstance(value, bool) or not isinstance(value, int):
        raise CodecError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class ScoreCodec:
    points_bits: int = REFERENCE_POINTS_BITS
    time_bits: int = REFERENCE_TIME_BITS
    resolution_seconds: int = 1

    def __post_init__(self) -> None:
        _require_int("points_bits", self.points_bits)
        _require_int("time_bits", self.time_bits)
        _require_int("resolution_seconds", self.resolution_seconds)
        if self.points_bits < 1 or self.time_bits < 1:
            raise CodecError("points_bits and time_bits must both be at least 1")
        if self.points_bits + self.time_bits > MAX_TOTAL_BITS:
            raise CodecError(
                f"{self.points_bits} points bits + {self.time_bits} time bits exceed "
                f"{MAX_TOTAL_BITS}: doubles would round and distinct scores would collide"
            )
        if self.resolution_seconds < 1:
            raise CodecError("resolution_seconds must be at least 1")

    # --- construction ----------------------------------------------------------------------

    @classmethod
    def reference(cls) -> ScoreCodec:
        return cls(REFERENCE_POINTS_BITS, REFERENCE_TIME_BITS, 1)

    @staticmethod
    def time_bits_for(*, duration: timedelta, resolution_seconds: int) -> int:
        """Bits needed to hold every tick from 0 to the end of a window of ``duration``."""
        _require_int("resolution_seconds", resolution_seconds)
        if resolution_seconds < 1:
            raise CodecError("resolution_seconds must be at least 1")
        if duration <= timedelta(0):
            raise CodecError(f"a season must last a positive time, got {duration}")
        # Integer arithmetic on microseconds: float seconds would round on long windows.
        duration_us = duration // timedelta(microseconds=1)
        max_ticks = math.ceil(duration_us / (resolution_seconds * 1_000_000))
        return max(1, max_ticks.bit_length())

    @classmethod
    def for_window(cls, *, duration: timedelta, resolution_seconds: int = 1) -> ScoreCodec:
        """The split for a season of ``duration``: time takes what it needs, points the rest."""
        time_bits = cls.time_bits_for(duration=duration, resolution_seconds=resolution_seconds)
        points_bits = MAX_TOTAL_BITS - time_bits
        if points_bits < MIN_POINTS_BITS:
            raise CodecError(
                f"a season of {duration} at {resolution_seconds}s resolution needs {time_bits} "
                f"time bits, leaving {points_bits} for points (< {MIN_POINTS_BITS}); "
                "use a coarser time resolution"
            )
        return cls(points_bits, time_bits, resolution_seconds)

    # --- bounds ------------------------------------------------------------------------------

    @property
    def max_points(self) -> int:
        return (1 << self.points_bits) - 1

    @property
    def max_ticks(self) -> int:
        return (1 << self.time_bits) - 1

    @property
    def max_score(self) -> int:
        return (1 << (self.points_bits + self.time_bits)) - 1

    # --- encoding ----------------------------------------------------------------------------

    def ticks(self, elapsed: timedelta) -> int:
        """Whole ticks of ``resolution_seconds`` in ``elapsed`` (floored)."""
        if not isinstance(elapsed, timedelta):
            raise CodecError(f"elapsed must be a timedelta, got {type(elapsed).__name__}")
        if elapsed.days < 0:
            raise CodecError(f"elapsed time {elapsed} is before the season's start")
        # Whole seconds suffice: dropping the sub-second part never changes the floor when a
        # tick is a whole number of seconds. (Called once per ingested result: no timedelta
        # arithmetic.)
        ticks = (elapsed.days * 86_400 + elapsed.seconds) // self.resolution_seconds
        if ticks >> self.time_bits:
            raise CodecError(
                f"elapsed time {elapsed} exceeds the codec's {self.time_bits} time bits "
                f"at {self.resolution_seconds}s resolution (max {self.max_ticks} ticks)"
            )
        return ticks

    def encode(self, *, points: int, elapsed_ticks: int) -> int:
        points = _require_int("points", points)
        elapsed_ticks = _require_int("elapsed_ticks", elapsed_ticks)
        if points < 0:
            raise CodecError(f"points must be >= 0, got {points}")
        if points > self.max_points:
            raise CodecError(
                f"points {points} exceed the codec's maximum {self.max_points} "
                f"({self.points_bits} bits)"
            )
        if elapsed_ticks < 0 or elapsed_ticks > self.max_ticks:
            raise CodecError(
                f"elapsed_ticks {elapsed_ticks} outside 0..{self.max_ticks} ({self.time_bits} bits)"
            )
        return (points << self.time_bits) | (self.max_ticks - elapsed_ticks)

    def encode_elapsed(self, *, points: int, elapsed: timedelta) -> int:
        return self.encode(points=points, elapsed_ticks=self.ticks(elapsed))

    def decode(self, score: int | float | str | bytes) -> DecodedScore:
        """Decode a score as Redis hands it back (a double, or its string form)."""
        value = self._score_to_int(score)
        if value < 0 or value > self.max_score:
            raise CodecError(f"score {score!r} is outside this codec's range 0..{self.max_score}")
        points = value >> self.time_bits
        elapsed_ticks = self.max_ticks - (value & self.max_ticks)
        return DecodedScore(points, elapsed_ticks, self.resolution_seconds)

    def decode_points(self, score: int | float | str | bytes) -> int:
        return self.decode(score).points

    @staticmethod
    def _score_to_int(score: int | float | str | bytes) -> int:
        if isinstance(score, bool):
            raise CodecError(f"not a score: {score!r}")
        if isinstance(score, int):
            return score
        if isinstance(score, bytes):
            score = score.decode("ascii")
        if isinstance(score, str):
            try:
                return int(score)
            except ValueError:
                try:
                    score = float(score)
                except ValueError as exc:
                    raise CodecError(f"not a score: {score!r}") from exc
        if isinstance(score, float):
            if not math.isfinite(score) or not score.is_integer():
                raise CodecError(f"score {score!r} is not an integral value")
            if abs(score) > 2.0**MAX_TOTAL_BITS:
                raise CodecError(f"score {score!r} is beyond 2**53: it may have been rounded")
            return int(score)
        raise CodecError(f"not a score: {score!r}")

    @staticmethod
    def to_redis(score: int) -> str:
        """Scores go to Redis as integer strings: a float repr could lose digits."""
        return str(_require_int("score", score))
