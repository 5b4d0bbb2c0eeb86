"""The match-result message contract: bytes (or an already-parsed dict) -> a typed, frozen value.

One UTF-8 JSON object per player result (see DESIGN.md, "Contracts > Kafka")::

    {"matchId": "<uuid>", "playerId": 42, "seasonId": 12, "points": 1518,
     "achievedAt": "2026-10-12T10:15:00Z", "board": "lap-times"}

``board`` is optional (contract 0.2): absent means the season's ``main`` board.
``displayName`` is optional (contract 0.3): the player's name, as of ``achievedAt``. It is
carried as sent and checked by the batch handler (players/schema.py), because a bad name never
sets the result aside: the result counts, the name is skipped (docs/ingestion.md).
``metadata`` is optional (contract 0.3): a JSON object of at most 512 bytes in its compact UTF-8
form, carried in that form; anything else sets the result aside (``invalid_metadata``,
``metadata_too_large``), whatever its board keeps.

``message_decode`` has two paths that accept exactly the same messages with the same values.
The fast one decodes with msgspec into a typed Struct (types, integer bounds and the board slug
checked in C) and takes the date-time shapes producers send; anything it does not take (a
rejection, a rarer shape, non-ASCII bytes) goes down the checked path, which alone writes every
rejection's code and reason. ``tests/ingestion/test_schema.py`` holds the two to the same
answers on generated input.

Everything here is pure: no database, no network. ``message_decode`` and ``message_validate``
check what the message alone can tell; ``message_check_board`` checks it against the season and
board it names (window, closed status, the board codec's point range) once the caller has
loaded them; ``message_check_not_future`` against the latest time the caller's clock accepts.
The Kafka consumer and the HTTP door share all four, so both reject exactly the same input with
the same reasons. Unknown extra fields are ignored so producers can add fields before consumers
know them.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Protocol

import msgspec
import orjson

from leaderboard.codec import BIGINT_MAX, TIEBREAK_VALUE_MAX, ScoreCodec

if TYPE_CHECKING:
    # For the annotations only, not for a cycle: game servers use this module (through
    # ingestion/producer.py) without Django.
    from seasons.models import Season

# No season codec can hold more points than this (53 bits minus at least one time bit); the
# exact per-board bound is checked in message_check_board.
POINTS_CEILING = (1 << 52) - 1
# RFC 3339 date-time: seconds are mandatory, and so is the offset ("Z" or +hh:mm).
_RFC3339 = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$"
)
# Statuses in which a season no longer accepts results. Only "closed": the window decides
# otherwise. A "closing" season still takes results achieved inside its window (queued in Kafka
# when it switched; its close-out waits for the consumer to drain them), and so does a
# "scheduled" one whose start passed before the status sync ran.
SEASON_STATUSES_REJECTING = frozenset({"closed"})

REQUIRED_FIELDS = ("matchId", "playerId", "seasonId", "points", "achievedAt")
INTEGER_FIELDS = ("playerId", "seasonId", "points")
_REQUIRED_FIELD_SET = frozenset(REQUIRED_FIELDS)
# Kept in step with leaderboard.models (BOARD_SLUG_PATTERN, MAIN_BOARD): this module runs
# without Django (game servers publish through ingestion/producer.py).
MAIN_BOARD = "main"
_BOARD_SLUG = re.compile(r"^[a-z0-9-]{1,32}$")


class BoardSpec(Protocol):
    """What validation needs of a board (leaderboard.models.Board, or a cached ref of it)."""

    @property
    def codec(self) -> ScoreCodec: ...

    @property
    def max_points(self) -> int: ...

    # The board's tie-break column names, in order (contract 0.3); () for a plain board.
    @property
    def tiebreak_names(self) -> tuple[str, ...]: ...


class MessageRejected(ValueError):
    """The message cannot be applied. ``reason`` is for humans; ``code`` is a stable tag."""

    def __init__(self, code: str, reason: str, *, field: str | None = None) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.field = field


# Stable codes, carried in the dead-letter header ``dlq.code`` and in HTTP 400 bodies.
NOT_UTF8 = "not_utf8"
NOT_JSON = "not_json"
NOT_OBJECT = "not_object"
MISSING_FIELD = "missing_field"
WRONG_TYPE = "wrong_type"
INVALID_VALUE = "invalid_value"
UNKNOWN_SEASON = "unknown_season"
UNKNOWN_BOARD = "unknown_board"
OUTSIDE_SEASON = "outside_season"
SEASON_CLOSED = "season_closed"
POINTS_TOO_LARGE = "points_too_large"
# achievedAt is later than the receiver's clock allows (now + INGEST_MAX_FUTURE_SKEW_SECONDS):
# the sender's clock would otherwise decide ties against every honest result.
ACHIEVED_IN_FUTURE = "achieved_in_future"
# metadata (contract 0.3) is not a JSON object, or its compact UTF-8 form is too long.
INVALID_METADATA = "invalid_metadata"
METADATA_TOO_LARGE = "metadata_too_large"
METADATA_MAX_BYTES = 512
# tiebreakers (contract 0.3) are not an object of exactly the board's columns, each an integer
# within 0..TIEBREAK_VALUE_MAX (or are sent to a board without columns).
INVALID_TIEBREAKERS = "invalid_tiebreakers"
# A check failed in a way it should not (a bug): the message is set aside, never a stop.
UNEXPECTED = "unexpected_error"
# Every code a match result can be dead-lettered with: these, and a tournament board's
# refusals (leaderboard.models.RefusalCode, decided when the batch is stored).
MESSAGE_CODES: tuple[str, ...] = (
    NOT_UTF8,
    NOT_JSON,
    NOT_OBJECT,
    MISSING_FIELD,
    WRONG_TYPE,
    INVALID_VALUE,
    UNKNOWN_SEASON,
    UNKNOWN_BOARD,
    OUTSIDE_SEASON,
    SEASON_CLOSED,
    POINTS_TOO_LARGE,
    ACHIEVED_IN_FUTURE,
    INVALID_METADATA,
    METADATA_TOO_LARGE,
    INVALID_TIEBREAKERS,
    UNEXPECTED,
)


# A msgspec Struct rather than a frozen dataclass: as immutable and typed, and built in C (one
# per ingested result; a frozen dataclass sets each field through object.__setattr__).
class MatchResultMessage(msgspec.Struct, frozen=True, gc=False):
    match_id: uuid.UUID
    player_id: int
    season_id: int
    points: int
    achieved_at: datetime  # timezone-aware, normalised to UTC
    # The board's slug (contract 0.2); "main" when the message names none.
    board: str = MAIN_BOARD
    # The optional displayName as sent (contract 0.3), unchecked; "" stands for a value that
    # is not a string (never a valid name either). None: absent or null.
    display_name: str | None = None
    # The optional metadata (contract 0.3), a JSON object in its compact UTF-8 form (checked:
    # at most METADATA_MAX_BYTES). None: absent or null.
    metadata: bytes | None = None
    # The optional tiebreakers (contract 0.3) as sent: names to integers, checked against the
    # board's columns by message_check_board. None: absent or null.
    tiebreakers: dict[str, int] | None = None

    def tiebreak_values(self, names: tuple[str, ...]) -> list[int]:
        """The values of the board's columns ``names``, in order (checked by
        message_check_board)."""
        assert self.tiebreakers is not None
        return [self.tiebreakers[name] for name in names]

    def to_contract(self) -> dict[str, Any]:
        """The contract's JSON object (camelCase), e.g. to publish it."""
        body: dict[str, Any] = {
            "matchId": str(self.match_id),
            "playerId": self.player_id,
            "seasonId": self.season_id,
            "points": self.points,
            "achievedAt": self.achieved_at.isoformat().replace("+00:00", "Z"),
        }
        if self.board != MAIN_BOARD:
            # Absent means main: contract 0.1 consumers and producers stay compatible.
            body["board"] = self.board
        if self.display_name is not None:
            body["displayName"] = self.display_name
        if self.metadata is not None:
            body["metadata"] = json_loads_exact(self.metadata.decode())
        if self.tiebreakers is not None:
            body["tiebreakers"] = dict(self.tiebreakers)
        return body

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_contract(), separators=(",", ":")).encode()


def _reject_constant(name: str) -> Any:
    # json.loads accepts NaN and Infinity by default; they are not JSON.
    raise ValueError(f"{name} is not valid JSON")


_ID = Annotated[int, msgspec.Meta(ge=1, le=BIGINT_MAX)]


class _WireMessage(msgspec.Struct, frozen=True, gc=False, rename="camel"):
    """The message as the fast path decodes it: what ``message_validate`` checks of each field's
    type and range, checked in C (msgspec takes the last of duplicate keys, as orjson does).
    achievedAt stays a string: msgspec's own date-time parser also takes forms the contract
    refuses (an offset without its colon, fractions rounded past microseconds)."""

    match_id: uuid.UUID
    player_id: _ID
    season_id: _ID
    points: Annotated[int, msgspec.Meta(ge=0, le=POINTS_CEILING)]
    achieved_at: str
    board: Annotated[str, msgspec.Meta(pattern=_BOARD_SLUG.pattern)] = MAIN_BOARD
    display_name: str | None = None
    # msgspec refuses an integer past 64 bits here (the checked path keeps it exact).
    metadata: dict[str, Any] | None = None
    # Beyond 64 bits, or a bool, msgspec refuses: the checked path gives the reason.
    tiebreakers: dict[str, int] | None = None


_wire_decoder = msgspec.json.Decoder(_WireMessage)
# The lengths of the date-time shapes the fast path takes: "2026-10-12T10:15:00Z", with
# ".123456" (six fraction digits, what isoformat writes), and either with "+hh:mm" for "Z".
_FAST_DATETIME_LENGTHS = frozenset({20, 27, 25, 32})


def _fast_datetime(value: str) -> datetime | None:
    """``value`` parsed as ``parse_rfc3339`` would, when it has one of the shapes above; None
    for any other shape. Within those shapes datetime.fromisoformat accepts exactly what the
    RFC 3339 pattern matches (the separators are checked here, the digits there), and raises
    where ``parse_rfc3339`` rejects."""
    n = len(value)
    # value[4:17:3]: the separators at 4, 7, 10, 13 and 16.
    if n not in _FAST_DATETIME_LENGTHS or value[4:17:3] != "--T::" or not value.isascii():
        return None
    if n > 25 and value[19] != ".":
        return None
    if n == 20 or n == 27:
        if value[-1] != "Z":
            return None
    elif value[-3] != ":" or value[-6] not in "+-":
        return None
    at = datetime.fromisoformat(value)
    return at if at.tzinfo is UTC else at.astimezone(UTC)


class IntegerLiteralTooLong(int):
    """A JSON integer literal longer than Python converts (``sys.get_int_max_str_digits()``,
    4,300 digits): valid JSON, out of range for every field. An int, so the rest of the value
    still encodes as JSON (the HTTP door's serializer re-encodes items); its value stands in
    and is never shown."""

    digits: int

    @classmethod
    def of(cls, literal: str) -> IntegerLiteralTooLong:
        negative = literal.startswith("-")
        stand_in = cls(-(BIGINT_MAX + 1) if negative else BIGINT_MAX + 1)
        stand_in.digits = len(literal) - negative
        return stand_in


def _parse_int(literal: str) -> int:
    try:
        return int(literal)
    except ValueError:
        return IntegerLiteralTooLong.of(literal)


def json_loads_exact(text: str) -> Any:
    """Python's json, with every integer literal an exact int (however long) and no NaN."""
    return json.loads(text, parse_constant=_reject_constant, parse_int=_parse_int)


def integers_read_as_floats(value: object) -> bool:
    """Whether an integer field of a result (``value``, or an item of it) came out a float.

    orjson reads an integer literal past 64 bits as a float (31 digits read as 1e+30), so
    only an exact parse (``json_loads_exact``) can tell it from a float literal. Only wrong
    messages pay for the second parse."""
    items = value if isinstance(value, list) else (value,)
    return any(
        isinstance(item, dict) and any(type(item.get(name)) is float for name in INTEGER_FIELDS)
        for item in items
    )


def _metadata_has_float(data: object) -> bool:
    """Whether the metadata may hold an integer literal orjson read as a float (past 64 bits):
    only the exact parse keeps such metadata as sent. Floats are rare on this path (the fast
    path takes ASCII messages), so checking for any float is enough."""
    if not isinstance(data, dict):
        return False
    metadata = data.get("metadata")
    return isinstance(metadata, dict) and _holds(metadata, float)


def _holds(value: object, kind: type) -> bool:
    """Whether a parsed JSON value holds a value of exactly the type ``kind``."""
    stack: list[object] = [value]
    while stack:
        item = stack.pop()
        if type(item) is kind:
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _unstorable(value: object) -> str | None:
    """Why PostgreSQL's jsonb could not store a parsed JSON value exactly, or None. A NUL
    (\\u0000, valid JSON) has no place in its text, and a number past a double (1e400 reads as
    infinity) has no JSON form: stored, either would fail the batch's insert (or, written as
    null, lose the value)."""
    stack: list[object] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return "holds a NUL character (\\u0000), which PostgreSQL cannot store"
        elif type(item) is float:
            if not math.isfinite(item):
                return "holds a number out of a double's range (it reads as infinity)"
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def metadata_compact(value: object) -> bytes | None:
    """The metadata field's value in its compact UTF-8 form; MessageRejected when it is not a
    JSON object or that form is longer than METADATA_MAX_BYTES. None (absent or null) is None.
    """
    if value is None:
        return None
    if not isinstance(value, dict):
        raise MessageRejected(
            INVALID_METADATA,
            f"metadata must be a JSON object, got {_json_type(value)}",
            field="metadata",
        )
    if _holds(value, IntegerLiteralTooLong):
        # Thousands of digits: past the size limit whatever else it holds.
        raise MessageRejected(
            METADATA_TOO_LARGE,
            f"metadata holds an integer literal too long to keep exactly, so more than the "
            f"maximum {METADATA_MAX_BYTES} bytes",
            field="metadata",
        )
    try:
        compact = orjson.dumps(value)
    except TypeError:
        # An integer past 64 bits (kept exact by the checked parse), or a lone surrogate.
        try:
            compact = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
        except (UnicodeEncodeError, ValueError) as exc:
            raise MessageRejected(
                INVALID_METADATA, f"metadata is not valid UTF-8 JSON: {exc}", field="metadata"
            ) from exc
    if len(compact) > METADATA_MAX_BYTES:
        raise MessageRejected(
            METADATA_TOO_LARGE,
            f"metadata is {len(compact)} bytes in compact UTF-8 JSON, more than the maximum "
            f"{METADATA_MAX_BYTES}",
            field="metadata",
        )
    # After the size: too large is too large, whatever else is wrong with it.
    unstorable = _unstorable(value)
    if unstorable:
        raise MessageRejected(INVALID_METADATA, f"metadata {unstorable}", field="metadata")
    return compact


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def message_decode(raw: bytes | None) -> MatchResultMessage:
    """Decode and validate one message value; raise ``MessageRejected`` with the reason."""
    # Non-ASCII bytes take the checked path: msgspec does not check the UTF-8 of the fields it
    # skips, which the checked path rejects (not_utf8).
    if raw is not None and raw.isascii():
        try:
            wire = _wire_decoder.decode(raw)
            at = _fast_datetime(wire.achieved_at)
            # orjson refuses an integer past 64 bits; that and a size to reject take the
            # checked path, which keeps the one exactly and gives the other its reason.
            metadata = None if wire.metadata is None else orjson.dumps(wire.metadata)
        except Exception:  # noqa: S110 -- whatever the fast path refuses, the checked path decides
            pass
        else:
            # Too long, or maybe holding a NUL (orjson writes it \u0000): the checked path
            # decides, and says why.
            if metadata is not None and (
                len(metadata) > METADATA_MAX_BYTES or b"\\u0000" in metadata
            ):
                at = None
            if at is not None:
                return MatchResultMessage(
                    wire.match_id,
                    wire.player_id,
                    wire.season_id,
                    wire.points,
                    at,
                    wire.board,
                    wire.display_name,
                    metadata,
                    wire.tiebreakers,
                )
    return message_decode_checked(raw)


def message_decode_checked(raw: bytes | None) -> MatchResultMessage:
    """``message_decode`` field by field, with the reason of every rejection."""
    if raw is None:
        raise MessageRejected(NOT_JSON, "empty message (no value)")
    try:
        # orjson first. It refuses some valid JSON (lone surrogates, integers beyond a double)
        # and reads integers past 64 bits as floats: such a message takes the path below,
        # which decides and explains exactly, so the two accept the same messages.
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    else:
        if not integers_read_as_floats(data) and not _metadata_has_float(data):
            return message_validate(data)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MessageRejected(NOT_UTF8, f"value is not UTF-8: {exc}") from exc
    try:
        data = json_loads_exact(text)
    except (ValueError, RecursionError) as exc:
        raise MessageRejected(NOT_JSON, f"value is not JSON: {exc}") from exc
    return message_validate(data)


def _int_text(value: int) -> str:
    """An integer for a reason: in full up to 40 digits, else its start and its length."""
    if isinstance(value, IntegerLiteralTooLong):
        return f"{'a negative' if value < 0 else 'an'} integer of {value.digits} digits"
    text = str(value)
    digits = len(text.lstrip("-"))
    return text if digits <= 40 else f"{text[:21]}... (an integer of {digits} digits)"


def _int_field(data: dict[str, Any], name: str, *, minimum: int, maximum: int, code: str) -> int:
    """An integer field within [minimum, maximum]; ``code`` names a value above the maximum."""
    value = data[name]
    # bool is an int subclass; true must not become 1. Floats (even 3.0, or 1e30) are a
    # producer bug. The decoders give exact ints for integer literals, however long.
    if type(value) is not int and (isinstance(value, bool) or not isinstance(value, int)):
        raise MessageRejected(
            WRONG_TYPE,
            f"{name} must be an integer, got {type(value).__name__} {repr(value)[:40]}",
            field=name,
        )
    if value < minimum:
        raise MessageRejected(
            INVALID_VALUE, f"{name} must be at least {minimum}, got {_int_text(value)}", field=name
        )
    if value > maximum:
        raise MessageRejected(
            code,
            f"{name} is out of range: {_int_text(value)} is larger than the maximum {maximum}",
            field=name,
        )
    return value


def _str_field(data: dict[str, Any], name: str) -> str:
    value = data[name]
    if not isinstance(value, str):
        raise MessageRejected(
            WRONG_TYPE, f"{name} must be a string, got {type(value).__name__}", field=name
        )
    return value


def parse_rfc3339(value: str, *, field: str = "achievedAt") -> datetime:
    """An RFC 3339 date-time with an offset, as an aware UTC datetime."""
    if not _RFC3339.match(value):
        raise MessageRejected(
            INVALID_VALUE,
            f"{field} must be an RFC 3339 date-time with an offset "
            f"(e.g. 2026-10-12T10:15:00Z), got {value[:40]!r}",
            field=field,
        )
    try:
        # Year 1 or 9999 with an offset can fall outside datetime's range once in UTC.
        return datetime.fromisoformat(value.upper()).astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise MessageRejected(
            INVALID_VALUE, f"{field} {value[:40]!r} is not a valid date-time: {exc}", field=field
        ) from exc


def message_validate(data: object) -> MatchResultMessage:
    """Validate an already-parsed JSON value (e.g. one element of an HTTP request body)."""
    if not isinstance(data, dict):
        raise MessageRejected(NOT_OBJECT, f"value must be a JSON object, got {type(data).__name__}")
    if not data.keys() >= _REQUIRED_FIELD_SET:
        missing = [name for name in REQUIRED_FIELDS if name not in data]
        raise MessageRejected(
            MISSING_FIELD, f"missing field(s): {', '.join(missing)}", field=missing[0]
        )

    raw_match_id = _str_field(data, "matchId")
    try:
        match_id = uuid.UUID(raw_match_id)
    except ValueError as exc:
        raise MessageRejected(
            INVALID_VALUE, f"matchId must be a UUID, got {raw_match_id[:40]!r}", field="matchId"
        ) from exc

    # Ids are PostgreSQL bigints; no board's codec holds more points than POINTS_CEILING.
    player_id = _int_field(data, "playerId", minimum=1, maximum=BIGINT_MAX, code=INVALID_VALUE)
    season_id = _int_field(data, "seasonId", minimum=1, maximum=BIGINT_MAX, code=INVALID_VALUE)
    points = _int_field(data, "points", minimum=0, maximum=POINTS_CEILING, code=POINTS_TOO_LARGE)
    achieved_at = parse_rfc3339(_str_field(data, "achievedAt"))
    board = MAIN_BOARD
    if "board" in data:
        board = _str_field(data, "board")
        if not _BOARD_SLUG.match(board):
            raise MessageRejected(
                INVALID_VALUE,
                f"board must be a board slug (1 to 32 of a-z, 0-9, '-'), got {board[:40]!r}",
                field="board",
            )
    display_name = data.get("displayName")
    if display_name is not None and not isinstance(display_name, str):
        display_name = ""
    metadata = metadata_compact(data.get("metadata"))
    tiebreakers = _tiebreakers_field(data.get("tiebreakers"))
    return MatchResultMessage(
        match_id=match_id,
        player_id=player_id,
        season_id=season_id,
        points=points,
        achieved_at=achieved_at,
        board=board,
        display_name=display_name,
        metadata=metadata,
        tiebreakers=tiebreakers,
    )


def _tiebreakers_field(value: object) -> dict[str, int] | None:
    """The tiebreakers field's shape: an object of integers (names and ranges are the board's
    to check)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise MessageRejected(
            INVALID_TIEBREAKERS,
            f"tiebreakers must be a JSON object of integers, got {_json_type(value)}",
            field="tiebreakers",
        )
    for name, item in value.items():
        if isinstance(item, bool) or not isinstance(item, int):
            raise MessageRejected(
                INVALID_TIEBREAKERS,
                f"tiebreakers.{_sent_name(name)} must be an integer, got {_json_type(item)}",
                field="tiebreakers",
            )
    return value


def _sent_name(name: object) -> str:
    """A name the sender chose, as a reason quotes it: cut to 32 characters, and a lone surrogate
    (valid JSON, not text) escaped, so the reason still encodes as UTF-8 (a dead letter's header,
    an HTTP 400's body)."""
    return str(name)[:32].encode("utf-8", "backslashreplace").decode()


def _check_tiebreakers(message: MatchResultMessage, board: BoardSpec, where: str) -> None:
    names = board.tiebreak_names
    sent = message.tiebreakers
    if not names:
        if sent is not None:
            raise MessageRejected(
                INVALID_TIEBREAKERS,
                f"{where} ranks by points only: it takes no tiebreakers",
                field="tiebreakers",
            )
        return
    if sent is None or set(sent) != set(names):
        got = "none" if sent is None else ", ".join(sorted(_sent_name(n) for n in sent)) or "{}"
        raise MessageRejected(
            INVALID_TIEBREAKERS,
            f"{where} needs tiebreakers with exactly its columns {', '.join(names)}; got {got}",
            field="tiebreakers",
        )
    for name in names:
        value = sent[name]
        if not 0 <= value <= TIEBREAK_VALUE_MAX:
            raise MessageRejected(
                INVALID_TIEBREAKERS,
                f"tiebreakers.{name} must be within 0..{TIEBREAK_VALUE_MAX}, got "
                f"{_int_text(value)}",
                field="tiebreakers",
            )


def message_check_board(
    message: MatchResultMessage, season: Season | None, board: BoardSpec | None
) -> None:
    """Reject a message its season or board cannot take: unknown, closed, out of window/range.

    ``season`` and ``board`` are the ones the message names (None when they do not exist).
    """
    if season is None:
        raise MessageRejected(
            UNKNOWN_SEASON, f"season {message.season_id} does not exist", field="seasonId"
        )
    if season.status in SEASON_STATUSES_REJECTING:
        raise MessageRejected(
            SEASON_CLOSED,
            f"season {season.id} is {season.status} and accepts no more results",
            field="seasonId",
        )
    if not season.starts_at <= message.achieved_at <= season.ends_at:
        raise MessageRejected(
            OUTSIDE_SEASON,
            f"achievedAt {message.achieved_at.isoformat()} is outside season {season.id} "
            f"({season.starts_at.isoformat()} .. {season.ends_at.isoformat()})",
            field="achievedAt",
        )
    if board is None:
        raise MessageRejected(
            UNKNOWN_BOARD,
            f"season {season.id} has no board {message.board!r}",
            field="board",
        )
    max_points = board.max_points
    if message.points > max_points:
        raise MessageRejected(
            POINTS_TOO_LARGE,
            f"points {message.points} exceed the maximum {max_points} of board "
            f"{message.board!r} of season {season.id}",
            field="points",
        )
    _check_tiebreakers(message, board, f"board {message.board!r} of season {season.id}")


def message_check_not_future(message: MatchResultMessage, *, not_after: datetime) -> None:
    """Reject a result achieved after ``not_after`` (the caller's now plus the allowed skew).

    A result from the future would win every tie on its points against results already counted,
    and the sender's clock alone would have decided it.
    """
    if message.achieved_at > not_after:
        raise MessageRejected(
            ACHIEVED_IN_FUTURE,
            f"achievedAt {message.achieved_at.isoformat()} is in the future: later than "
            f"{not_after.isoformat()} (now plus the allowed clock skew)",
            field="achievedAt",
        )
