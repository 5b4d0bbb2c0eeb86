"""The composite score codec: points and time packed into one integer exact in a double.

Redis sorted-set scores are IEEE-754 doubles, exact for every integer up to 2**53. A score
packs ``points`` in the high bits and ``max_ticks - elapsed_ticks`` in the low bits, so that
of two equal point values the one reached earlier is numerically larger and ranks higher in
descending order. Never exceed 53 bits in total: past that, doubles round and two different
scores collide silently, which skews the whole board without any error. That is why every
out-of-range value raises ``CodecError`` instead of being clamped or wrapped.

The split is per board: its season's length and the board's time resolution bound
``elapsed``, so the time part takes just the bits it needs and the points part takes the rest.
The reference split is 21 bits of points and 32 bits of seconds.

An ascending board (lowest wins: lap times) stores ``max_points - points`` in the high bits, so
Redis's descending order still puts the best first and ties still go to whoever reached the
value first; decoding gives the raw points back.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
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
    # Lowest points rank first (the board's order is "asc").
    ascending: bool = False

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
        if not isinstance(self.ascending, bool):
            raise CodecError(f"ascending must be a bool, got {self.ascending!r}")

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
    def for_window(
        cls, *, duration: timedelta, resolution_seconds: int = 1, ascending: bool = False
    ) -> ScoreCodec:
        """The split for a season of ``duration``: time takes what it needs, points the rest."""
        time_bits = cls.time_bits_for(duration=duration, resolution_seconds=resolution_seconds)
        points_bits = MAX_TOTAL_BITS - time_bits
        if points_bits < MIN_POINTS_BITS:
            raise CodecError(
                f"a season of {duration} at {resolution_seconds}s resolution needs {time_bits} "
                f"time bits, leaving {points_bits} for points (< {MIN_POINTS_BITS}); "
                "use a coarser time resolution"
            )
        return cls(points_bits, time_bits, resolution_seconds, ascending)

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
        high = self.max_points - points if self.ascending else points
        return (high << self.time_bits) | (self.max_ticks - elapsed_ticks)

    def encode_elapsed(self, *, points: int, elapsed: timedelta) -> int:
        return self.encode(points=points, elapsed_ticks=self.ticks(elapsed))

    def decode(self, score: int | float | str | bytes) -> DecodedScore:
        """Decode a score as Redis hands it back (a double, or its string form)."""
        value = self._score_to_int(score)
        if value < 0 or value > self.max_score:
            raise CodecError(f"score {score!r} is outside this codec's range 0..{self.max_score}")
        high = value >> self.time_bits
        points = self.max_points - high if self.ascending else high
        elapsed_ticks = self.max_ticks - (value & self.max_ticks)
        return DecodedScore(points, elapsed_ticks, self.resolution_seconds)

    def decode_points(self, score: int | float | str | bytes) -> int:
        """``decode(score).points`` without the DecodedScore: every entry of every read calls
        it. Redis answers an integral score as its digits, which ``int`` reads from the bytes
        directly; anything else takes ``decode``'s checks."""
        if type(score) is not bytes:
            return self.decode(score).points
        try:
            value = int(score)
        except ValueError:
            return self.decode(score).points
        if value < 0 or value > self.max_score:
            raise CodecError(f"score {score!r} is outside this codec's range 0..{self.max_score}")
        high = value >> self.time_bits
        return self.max_points - high if self.ascending else high

    def decode_points_many(self, scores: Sequence[int | float | str | bytes]) -> list[int]:
        """``decode_points`` of each of ``scores``, the codec's constants read once: a cohort's
        or a friends list's entries decode together."""
        max_score, time_bits = self.max_score, self.time_bits
        max_points, ascending = self.max_points, self.ascending
        points: list[int] = []
        for score in scores:
            try:
                value = int(score) if type(score) is bytes else -1
            except ValueError:
                value = -1
            if not 0 <= value <= max_score:
                # Not integral digits, or out of range: decode_points' checks and its error.
                points.append(self.decode_points(score))
                continue
            high = value >> time_bits
            points.append(max_points - high if ascending else high)
        return points

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


# --- wide keys: points and tie-break columns past 53 bits ---------------------------------------

# Points and every tie-break column of a board with tie-break columns (contract 0.3) range over
# 0..TIEBREAK_VALUE_MAX: a PostgreSQL INTEGER, eight hex digits.
TIEBREAK_VALUE_MAX = 2_147_483_647
MAX_TIEBREAK_COLUMNS = 3
_VALUE_DIGITS = 8


@dataclass(frozen=True, slots=True)
class WideKey:
    """A decoded wide key: the points, each tie-break column in the board's order, and ticks."""

    points: int
    tiebreakers: tuple[int, ...]
    elapsed_ticks: int


@dataclass(frozen=True, slots=True)
class WideKeyCodec:
    """The whole ranking key of a board with tie-break columns, as a fixed-width hex string.

    A double holds 53 bits; points, up to three 31-bit columns and the time are up to 156. The
    key is instead a string whose byte order is the ranking order, best first: each value takes
    eight hex digits (a descending value is stored as ``TIEBREAK_VALUE_MAX - value`` so that
    the larger sorts first), then the elapsed ticks in just the hex digits the board's time
    bits need (the earlier sorts first). The board's sorted set holds every member at score 0
    as ``key + player id``, so Redis's lexicographic order among equal scores *is* the ranking
    and ZRANK is the position; players whose keys are equal share a rank. Exact at any width:
    nothing is ever rounded, and a value out of range raises instead of wrapping.

    Hex digits only, lower case: no byte Lua or a client could treat specially, and a prefix
    of fixed width, so the player id needs no separator.
    """

    # Points first, then each tie-break column: True where lower is better.
    ascending: tuple[bool, ...]
    time_bits: int

    def __post_init__(self) -> None:
        if not 2 <= len(self.ascending) <= 1 + MAX_TIEBREAK_COLUMNS:
            raise CodecError(
                f"a wide key has points and 1..{MAX_TIEBREAK_COLUMNS} tie-break columns, "
                f"got {len(self.ascending) - 1} columns"
            )
        if not all(isinstance(a, bool) for a in self.ascending):
            raise CodecError(f"ascending must be bools, got {self.ascending!r}")
        _require_int("time_bits", self.time_bits)
        if not 1 <= self.time_bits <= MAX_TOTAL_BITS:
            raise CodecError(f"time_bits must be within 1..{MAX_TOTAL_BITS}, got {self.time_bits}")

    @property
    def tick_digits(self) -> int:
        return (self.time_bits + 3) // 4

    @property
    def key_length(self) -> int:
        return _VALUE_DIGITS * len(self.ascending) + self.tick_digits

    @property
    def max_ticks(self) -> int:
        return (1 << self.time_bits) - 1

    @property
    def columns(self) -> int:
        return len(self.ascending) - 1

    def encode(self, *, points: int, tiebreakers: tuple[int, ...], elapsed_ticks: int) -> str:
        values = (points, *tiebreakers)
        if len(values) != len(self.ascending):
            raise CodecError(f"expected {self.columns} tie-break values, got {len(tiebreakers)}")
        parts = []
        for index, (value, ascending) in enumerate(zip(values, self.ascending, strict=True)):
            value = _require_int("points" if index == 0 else f"tie-break column {index}", value)
            if not 0 <= value <= TIEBREAK_VALUE_MAX:
                raise CodecError(
                    f"{'points' if index == 0 else f'tie-break column {index}'} {value} "
                    f"outside 0..{TIEBREAK_VALUE_MAX}"
                )
            parts.append(f"{value if ascending else TIEBREAK_VALUE_MAX - value:08x}")
        elapsed_ticks = _require_int("elapsed_ticks", elapsed_ticks)
        if not 0 <= elapsed_ticks <= self.max_ticks:
            raise CodecError(
                f"elapsed_ticks {elapsed_ticks} outside 0..{self.max_ticks} ({self.time_bits} bits)"
            )
        parts.append(f"{elapsed_ticks:0{self.tick_digits}x}")
        return "".join(parts)

    def keys_of(
        self, *, points: list[int], tiebreakers: list[list[int]], ticks: list[int]
    ) -> list[str]:
        """``encode`` of many results whose values the caller has checked already (the message
        schema, the season's window): the ingestion path, one format per result."""
        fmt = "%08x" * len(self.ascending) + f"%0{self.tick_digits}x"
        # Each stored value is base + sign * value (a descending one: MAX - value), spelled
        # out per width: about a microsecond a result, a third of a generic zip's cost.
        (b0, s0), *rest = [(0, 1) if a else (TIEBREAK_VALUE_MAX, -1) for a in self.ascending]
        rows = zip(points, tiebreakers, ticks, strict=True)
        if len(rest) == 1:
            ((b1, s1),) = rest
            return [fmt % (b0 + s0 * p, b1 + s1 * t[0], k) for p, t, k in rows]
        if len(rest) == 2:
            (b1, s1), (b2, s2) = rest
            return [fmt % (b0 + s0 * p, b1 + s1 * t[0], b2 + s2 * t[1], k) for p, t, k in rows]
        (b1, s1), (b2, s2), (b3, s3) = rest
        return [
            fmt % (b0 + s0 * p, b1 + s1 * t[0], b2 + s2 * t[1], b3 + s3 * t[2], k)
            for p, t, k in rows
        ]

    def decode(self, key: str | bytes) -> WideKey:
        if isinstance(key, bytes):
            key = key.decode("ascii")
        if len(key) != self.key_length:
            raise CodecError(f"wide key {key!r} is not {self.key_length} hex digits long")
        try:
            values = []
            for index, ascending in enumerate(self.ascending):
                stored = int(key[index * _VALUE_DIGITS : (index + 1) * _VALUE_DIGITS], 16)
                if stored > TIEBREAK_VALUE_MAX:
                    raise CodecError(f"wide key {key!r} holds a value past {TIEBREAK_VALUE_MAX}")
                values.append(stored if ascending else TIEBREAK_VALUE_MAX - stored)
            ticks = int(key[_VALUE_DIGITS * len(self.ascending) :], 16)
        except ValueError as exc:
            raise CodecError(f"wide key {key!r} is not hex") from exc
        if ticks > self.max_ticks:
            raise CodecError(f"wide key {key!r} holds ticks past {self.max_ticks}")
        return WideKey(values[0], tuple(values[1:]), ticks)

    def member(self, *, key: str, player_id: int) -> str:
        return f"{key}{player_id}"

    def member_split(self, member: str | bytes) -> tuple[str, int]:
        """``(key, player_id)`` of a member of the board's sorted set."""
        if isinstance(member, bytes):
            member = member.decode("ascii")
        key, player = member[: self.key_length], member[self.key_length :]
        if not player.isdigit():
            raise CodecError(f"member {member!r} does not end in a player id")
        return key, int(player)
