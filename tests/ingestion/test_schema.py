from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingestion import schema
from ingestion.schema import MatchResultMessage, MessageRejected
from leaderboard.codec import TIEBREAK_VALUE_MAX, ScoreCodec
from leaderboard.models import board_codec
from seasons.models import Season

MATCH = "6f1c2a5e-9a55-4a8b-8d6e-0d1f6a2b3c4d"


def _good(**overrides: object) -> dict[str, object]:
    data: dict[str, object] = {
        "matchId": MATCH,
        "playerId": 42,
        "seasonId": 12,
        "points": 1518,
        "achievedAt": "2026-10-12T10:15:00Z",
    }
    data.update(overrides)
    return data


def test_decodes_the_contract_example() -> None:
    message = schema.message_decode(json.dumps(_good()).encode())
    assert message == MatchResultMessage(
        match_id=uuid.UUID(MATCH),
        player_id=42,
        season_id=12,
        points=1518,
        achieved_at=datetime(2026, 10, 12, 10, 15, tzinfo=UTC),
    )


def test_offsets_are_normalised_to_utc_and_extra_fields_ignored() -> None:
    message = schema.message_validate(_good(achievedAt="2026-10-12T12:15:00.5+02:00", extra=1))
    assert message.achieved_at == datetime(2026, 10, 12, 10, 15, 0, 500000, tzinfo=UTC)
    assert message.achieved_at.tzinfo is UTC


def test_round_trips_through_its_contract_bytes() -> None:
    message = schema.message_validate(_good())
    assert schema.message_decode(message.to_bytes()) == message


# --- metadata (contract 0.3) -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metadata", "compact"),
    [
        (None, None),
        ({}, b"{}"),
        ({"car": "Aster GT", "lap": 81.5}, b'{"car":"Aster GT","lap":81.5}'),
        # 512 bytes exactly: 6 + 2 * 252 + 2 (é is two bytes of UTF-8).
        ({"a": "é" * 252}, ('{"a":"' + "é" * 252 + '"}').encode()),
        ({"big": 10**30}, b'{"big":1000000000000000000000000000000}'),
        ({"n": {"d": [1, None, True]}}, b'{"n":{"d":[1,null,true]}}'),
    ],
)
def test_metadata_is_kept_in_its_compact_utf8_form(metadata: object, compact: bytes | None) -> None:
    for ensure_ascii in (True, False):
        raw = json.dumps(_good(metadata=metadata), ensure_ascii=ensure_ascii, indent=2).encode()
        message = schema.message_decode(raw)
        assert message.metadata == compact
        assert schema.message_decode(message.to_bytes()) == message


@pytest.mark.parametrize(
    ("metadata", "code", "reason"),
    [
        ([1], schema.INVALID_METADATA, "metadata must be a JSON object, got an array"),
        ("car", schema.INVALID_METADATA, "metadata must be a JSON object, got a string"),
        (5, schema.INVALID_METADATA, "metadata must be a JSON object, got a number"),
        (True, schema.INVALID_METADATA, "metadata must be a JSON object, got a boolean"),
        (
            {"a": "é" * 253},
            schema.METADATA_TOO_LARGE,
            "metadata is 514 bytes in compact UTF-8 JSON, more than the maximum 512",
        ),
        (
            {"a": "x" * 506},
            schema.METADATA_TOO_LARGE,
            "metadata is 514 bytes in compact UTF-8 JSON, more than the maximum 512",
        ),
    ],
)
def test_metadata_that_is_not_an_object_or_too_large_is_rejected(
    metadata: object, code: str, reason: str
) -> None:
    raw = json.dumps(_good(metadata=metadata)).encode()
    with pytest.raises(MessageRejected) as caught:
        schema.message_decode(raw)
    assert (caught.value.code, caught.value.reason, caught.value.field) == (
        code,
        reason,
        "metadata",
    )


def test_metadata_that_cannot_be_kept_exactly_is_invalid_unless_too_large() -> None:
    head = json.dumps(_good()).encode()[:-1]
    for raw, code in (
        # A lone surrogate has no UTF-8 form, a NUL no place in jsonb.
        (head + b', "metadata": {"a": "\\ud800"}}', schema.INVALID_METADATA),
        (head + b', "metadata": {"a": "\\u0000"}}', schema.INVALID_METADATA),
        # Too large first, whatever else is wrong with it (the contract: larger is too large):
        # an integer of 5,000 digits (no exact parse), a NUL in 600 bytes.
        (head + b', "metadata": {"a": 1' + b"0" * 5000 + b"}}", schema.METADATA_TOO_LARGE),
        (
            head + b', "metadata": {"a": "\\u0000' + b"x" * 600 + b'"}}',
            schema.METADATA_TOO_LARGE,
        ),
    ):
        with pytest.raises(MessageRejected) as caught:
            schema.message_decode(raw)
        assert caught.value.code == code, raw[-40:]


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"\xff\xfe", schema.NOT_UTF8),
        (b"not json", schema.NOT_JSON),
        (b'{"points": NaN}', schema.NOT_JSON),
        (b"", schema.NOT_JSON),
        (b"[1, 2]", schema.NOT_OBJECT),
        (b'"text"', schema.NOT_OBJECT),
    ],
)
def test_rejects_values_that_are_not_a_json_object(raw: bytes, code: str) -> None:
    with pytest.raises(MessageRejected) as caught:
        schema.message_decode(raw)
    assert caught.value.code == code
    assert caught.value.reason


def test_rejects_a_missing_value() -> None:
    with pytest.raises(MessageRejected) as caught:
        schema.message_decode(None)
    assert caught.value.code == schema.NOT_JSON


@pytest.mark.parametrize("field", schema.REQUIRED_FIELDS)
def test_names_each_missing_field(field: str) -> None:
    data = _good()
    del data[field]
    with pytest.raises(MessageRejected) as caught:
        schema.message_validate(data)
    assert caught.value.code == schema.MISSING_FIELD
    assert caught.value.field == field
    assert field in caught.value.reason


@pytest.mark.parametrize(
    ("overrides", "code", "field"),
    [
        ({"matchId": 12}, schema.WRONG_TYPE, "matchId"),
        ({"matchId": "not-a-uuid"}, schema.INVALID_VALUE, "matchId"),
        ({"playerId": "42"}, schema.WRONG_TYPE, "playerId"),
        ({"playerId": True}, schema.WRONG_TYPE, "playerId"),
        ({"playerId": 42.0}, schema.WRONG_TYPE, "playerId"),
        ({"playerId": 0}, schema.INVALID_VALUE, "playerId"),
        ({"playerId": -3}, schema.INVALID_VALUE, "playerId"),
        ({"playerId": 1 << 63}, schema.INVALID_VALUE, "playerId"),
        ({"seasonId": None}, schema.WRONG_TYPE, "seasonId"),
        ({"seasonId": 0}, schema.INVALID_VALUE, "seasonId"),
        ({"points": -1}, schema.INVALID_VALUE, "points"),
        ({"points": 1.5}, schema.WRONG_TYPE, "points"),
        ({"points": 1 << 60}, schema.POINTS_TOO_LARGE, "points"),
        ({"achievedAt": 1760000000}, schema.WRONG_TYPE, "achievedAt"),
        ({"achievedAt": "2026-10-12T10:15:00"}, schema.INVALID_VALUE, "achievedAt"),
        ({"achievedAt": "2026-10-12"}, schema.INVALID_VALUE, "achievedAt"),
        ({"achievedAt": "2026-10-12T10:15Z"}, schema.INVALID_VALUE, "achievedAt"),
        ({"achievedAt": "2026-13-12T10:15:00Z"}, schema.INVALID_VALUE, "achievedAt"),
        ({"achievedAt": "yesterday"}, schema.INVALID_VALUE, "achievedAt"),
        ({"achievedAt": "0001-01-01T00:00:00+01:00"}, schema.INVALID_VALUE, "achievedAt"),
        ({"achievedAt": "9999-12-31T23:59:59-01:00"}, schema.INVALID_VALUE, "achievedAt"),
    ],
)
def test_rejects_mistyped_and_out_of_range_fields(
    overrides: dict[str, object], code: str, field: str
) -> None:
    with pytest.raises(MessageRejected) as caught:
        schema.message_validate(_good(**overrides))
    assert (caught.value.code, caught.value.field) == (code, field)


def _raw(**literals: str) -> bytes:
    """The contract example's bytes with some fields' JSON literals written out as given."""
    fields = {key: json.dumps(value) for key, value in _good().items()} | literals
    return ("{" + ",".join(f'"{key}":{value}' for key, value in fields.items()) + "}").encode()


BIGINT_MAX = (1 << 63) - 1
POINTS_MAX = (1 << 52) - 1
THIRTY_ONE_DIGITS = "1" + "0" * 30


@pytest.mark.parametrize(
    ("field", "literal", "code", "reason"),
    [
        # orjson reads an integer literal past 64 bits as a float (this one as 1e+30): the
        # reason said "must be an integer, got float 1e+30" for an integer.
        (
            "points",
            THIRTY_ONE_DIGITS,
            schema.POINTS_TOO_LARGE,
            f"points is out of range: {THIRTY_ONE_DIGITS} is larger than the maximum {POINTS_MAX}",
        ),
        (
            "playerId",
            THIRTY_ONE_DIGITS,
            schema.INVALID_VALUE,
            f"playerId is out of range: {THIRTY_ONE_DIGITS} is larger than the maximum "
            f"{BIGINT_MAX}",
        ),
        (
            "seasonId",
            "18446744073709551616",  # 2^64: the first integer orjson reads as a float
            schema.INVALID_VALUE,
            f"seasonId is out of range: 18446744073709551616 is larger than the maximum "
            f"{BIGINT_MAX}",
        ),
        (
            "playerId",
            str(BIGINT_MAX + 1),  # orjson's exact int, one past the bigint
            schema.INVALID_VALUE,
            f"playerId is out of range: {BIGINT_MAX + 1} is larger than the maximum {BIGINT_MAX}",
        ),
        (
            "points",
            "-18446744073709551617",
            schema.INVALID_VALUE,
            "points must be at least 0, got -18446744073709551617",
        ),
        ("playerId", "0", schema.INVALID_VALUE, "playerId must be at least 1, got 0"),
        # Longer than Python converts (4,300 digits): still JSON, still an integer.
        (
            "points",
            "9" * 5000,
            schema.POINTS_TOO_LARGE,
            f"points is out of range: an integer of 5000 digits is larger than the maximum "
            f"{POINTS_MAX}",
        ),
        (
            "seasonId",
            "-" + "9" * 5000,
            schema.INVALID_VALUE,
            "seasonId must be at least 1, got a negative integer of 5000 digits",
        ),
        (
            "points",
            "1" + "0" * 400,
            schema.POINTS_TOO_LARGE,
            f"points is out of range: 1{'0' * 20}... (an integer of 401 digits) is larger than "
            f"the maximum {POINTS_MAX}",
        ),
        # Float literals are not integers, whatever their value.
        ("points", "1e30", schema.WRONG_TYPE, "points must be an integer, got float 1e+30"),
        ("points", "1E2", schema.WRONG_TYPE, "points must be an integer, got float 100.0"),
        ("playerId", "42.0", schema.WRONG_TYPE, "playerId must be an integer, got float 42.0"),
    ],
)
def test_an_integer_literal_out_of_range_says_so_and_a_float_literal_is_not_an_integer(
    field: str, literal: str, code: str, reason: str
) -> None:
    with pytest.raises(MessageRejected) as caught:
        schema.message_decode(_raw(**{field: literal}))
    assert (caught.value.code, caught.value.field, caught.value.reason) == (code, field, reason)


def test_long_literals_elsewhere_change_nothing() -> None:
    # An extra field's huge or float number is ignored, as before (the exact parse is a detour
    # for messages whose integer fields came out as floats, and for what orjson refuses).
    message = schema.message_decode(_raw(extra="9" * 5000, other="1e400", third=THIRTY_ONE_DIGITS))
    assert message == schema.message_validate(_good())


def test_an_integer_field_that_is_a_float_takes_the_exact_parse_only_then() -> None:
    assert schema.integers_read_as_floats({"points": 1e30})
    assert schema.integers_read_as_floats([_good(), _good(playerId=1e30)])
    assert not schema.integers_read_as_floats(_good(extra=1.5))
    assert not schema.integers_read_as_floats([_good(), "x", 1.5])


def _season(**overrides: object) -> Season:
    # Unsaved: message_check_board needs no database.
    fields: dict[str, object] = {
        "id": 12,
        "name": "S12",
        "starts_at": datetime(2026, 10, 1, tzinfo=UTC),
        "ends_at": datetime(2026, 12, 31, tzinfo=UTC),
        "status": "active",
    }
    fields.update(overrides)
    return Season(**fields)


@dataclass(frozen=True)
class _Board:
    codec: ScoreCodec
    tiebreak_names: tuple[str, ...] = ()

    @property
    def max_points(self) -> int:
        return TIEBREAK_VALUE_MAX if self.tiebreak_names else self.codec.max_points


# The season's main board: 23 time bits (91 days at one second), 30 points bits.
_MAIN = _Board(board_codec(time_bits=23, resolution_seconds=1, ascending=False))


def _check(message: MatchResultMessage, season: Season | None) -> None:
    """The season check, with the message's board the season's main one (or none)."""
    board = _MAIN if season is not None and message.board == "main" else None
    schema.message_check_board(message, season, board)


def test_a_message_without_board_means_main_and_keeps_the_contract_0_1_shape() -> None:
    message = schema.message_validate(_good())
    assert message.board == "main"
    assert "board" not in message.to_contract()
    other = schema.message_validate(_good(board="lap-times"))
    assert other.board == "lap-times"
    assert other.to_contract()["board"] == "lap-times"
    assert schema.message_decode(other.to_bytes()) == other


@pytest.mark.parametrize("board", ["", "Main", "a_b", "x" * 33, 7, None])
def test_a_malformed_board_is_rejected(board: object) -> None:
    with pytest.raises(MessageRejected) as caught:
        schema.message_validate(_good(board=board))
    assert caught.value.code in {schema.INVALID_VALUE, schema.WRONG_TYPE}
    assert caught.value.field == "board"


def test_an_unknown_board_is_its_own_reason() -> None:
    message = schema.message_validate(_good(board="kills"))
    with pytest.raises(MessageRejected) as caught:
        _check(message, _season())
    assert caught.value.code == schema.UNKNOWN_BOARD
    assert "kills" in caught.value.reason


def test_a_message_inside_an_open_season_passes() -> None:
    _check(schema.message_validate(_good()), _season())
    _check(schema.message_validate(_good()), _season(status="scheduled"))


def test_the_season_window_is_inclusive() -> None:
    season = _season()
    for moment in (season.starts_at, season.ends_at):
        message = schema.message_validate(_good(achievedAt=moment.isoformat()))
        _check(message, season)


@pytest.mark.parametrize(
    ("season_kwargs", "overrides", "code"),
    [
        (None, {}, schema.UNKNOWN_SEASON),
        ({"status": "closed"}, {}, schema.SEASON_CLOSED),
        ({}, {"achievedAt": "2026-09-30T23:59:59Z"}, schema.OUTSIDE_SEASON),
        ({}, {"achievedAt": "2026-12-31T00:00:01Z"}, schema.OUTSIDE_SEASON),
        ({}, {"points": 1 << 30}, schema.POINTS_TOO_LARGE),
    ],
)
def test_season_checks(
    season_kwargs: dict[str, object] | None, overrides: dict[str, object], code: str
) -> None:
    season = None if season_kwargs is None else _season(**season_kwargs)
    message = schema.message_validate(_good(**overrides))
    with pytest.raises(MessageRejected) as caught:
        _check(message, season)
    assert caught.value.code == code


@pytest.mark.parametrize("status", ["scheduled", "active", "closing"])
def test_the_window_decides_until_the_season_is_closed(status: str) -> None:
    # Results queued in Kafka when the season switched to closing (or achieved before a lagging
    # status sync activated it) still count; only the window and "closed" reject them.
    season = _season(status=status)
    for moment in (season.starts_at, season.ends_at):
        _check(schema.message_validate(_good(achievedAt=moment.isoformat())), season)
    late = schema.message_validate(_good(achievedAt="2026-12-31T00:00:01Z"))
    with pytest.raises(MessageRejected) as caught:
        _check(late, season)
    assert caught.value.code == schema.OUTSIDE_SEASON


def test_the_codec_maximum_itself_is_accepted() -> None:
    season = _season()
    message = schema.message_validate(_good(points=_MAIN.codec.max_points))
    _check(message, season)


# --- the fast path and the checked path answer alike ----------------------------------------

_UUIDS = [MATCH, MATCH.upper(), MATCH.replace("-", ""), "{" + MATCH + "}", "urn:uuid:" + MATCH]
_FIELD_VALUES: dict[str, list[object]] = {
    "matchId": [*_UUIDS, MATCH[:-1] + "g", "", 12, None, [MATCH]],
    "playerId": [1, 42, 0, -1, (1 << 63) - 1, 1 << 63, 1 << 64, True, 1.0, "42", None],
    "seasonId": [12, 0, (1 << 63) - 1, 1 << 63, False, 12.5, None],
    "points": [0, 1518, -1, schema.POINTS_CEILING, schema.POINTS_CEILING + 1, 1 << 60, 1e3, "5"],
    "achievedAt": [
        "2026-10-12T10:15:00Z",
        "2026-10-12T10:15:00.123456Z",
        "2026-10-12T12:15:00+02:00",
        "2026-10-12T05:45:00.000001-04:30",
        "2026-10-12T10:15:00-00:00",
        "2026-10-12T10:15:00.5Z",
        "2026-10-12T10:15:00.1234567Z",
        "2026-10-12T10:15:00.1234567+02:00",
        "2026-10-12T10:15:00+0200",
        "2026-10-12T10:15:00.123456+0000",
        "2026-10-12t10:15:00Z",
        "2026-10-12 10:15:00Z",
        "2026-10-12T10:15:00z",
        "2026-10-12X10:15:00Z",
        "2026-W41-1T10:15:00Z",
        "2026-10-12T10:15Z",
        "2026-10-12T10:15:00",
        "2026-02-30T10:15:00Z",
        "2026-10-12T24:00:00Z",
        "2026-10-12T23:59:60Z",
        "2026-10-12T10:15:00+24:00",
        "2026-10-12T10:15:00+23:59",
        "2026-10-12T1a:15:00Z",
        "2026-10-12T10:15:00.12345aZ",
        "0001-01-01T00:00:00+01:00",
        "9999-12-31T23:59:59-01:00",
        "2026-10-12T10:15:00Z\n",
        "\u0662\u0660\u0662\u0666-10-12T10:15:00Z",
        1760000000,
        None,
    ],
    "board": ["main", "lap-times", "a" * 32, "a" * 33, "Main", "", "main\n", "é", None, 5],
    "metadata": [
        {"car": "Aster GT", "lap": 81.5},
        None,
        {},
        [1],
        "car",
        5,
        True,
        {"a": 10**30},
        {"a": 1e300},
        {"a": "é"},
        {"a": "x" * 505},
        {"a": "x" * 506},
        {"a": "é" * 252},
        {"a": "é" * 253},
        {"n": {"d": [1, 2.5, None, True, "\u00e9"]}},
    ],
}


@st.composite
def _raw_messages(draw: st.DrawFn) -> bytes:
    # Mostly valid fields (the first of each list), so that one odd field, key or byte decides.
    body: dict[str, object] = {}
    for name, values in _FIELD_VALUES.items():
        if draw(st.integers(0, 19)) == 0 or (name == "board" and draw(st.booleans())):
            continue  # a field left out
        odd = draw(st.integers(0, 3)) == 0
        body[name] = draw(st.sampled_from(values)) if odd else values[0]
    if draw(st.integers(0, 4)) == 0:
        body[draw(st.sampled_from(["extra", "matchid", "note"]))] = draw(
            st.sampled_from([1, "x", [1, 2], {"a": None}, 1e300, "\u00e9"])
        )
    raw = json.dumps(body, ensure_ascii=draw(st.booleans())).encode()
    mutation = draw(st.integers(0, 9))
    if mutation == 0:  # a byte changed, dropped or added
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(st.binary(max_size=2)) + raw[at + draw(st.integers(0, 1)) :]
    elif mutation == 1:  # a duplicate key, which JSON decoders resolve to the last one
        name = draw(st.sampled_from(list(_FIELD_VALUES)))
        value = json.dumps(draw(st.sampled_from(_FIELD_VALUES[name])))
        raw = raw.replace(b"{", f'{{"{name}": {value}, '.encode(), 1)
    elif mutation == 2:  # a key written with an escape
        raw = raw.replace(b'"playerId"', b'"player\\u0049d"')
    elif mutation == 3:  # bytes that are not UTF-8, in a field no check reads
        raw = raw.replace(b"{", b'{"skipped": "\xff\xfe", ', 1)
    return raw


def _answer(decode: Callable[[bytes | None], MatchResultMessage], raw: bytes | None) -> object:
    try:
        return decode(raw)
    except MessageRejected as exc:
        return (exc.code, exc.reason, exc.field)


@settings(max_examples=3000, deadline=None)
@given(_raw_messages())
def test_the_fast_path_decides_as_the_checked_path(raw: bytes) -> None:
    """Every input gets the same answer from both: the same message, or the same rejection
    (code, reason, field). The fast path takes a message only when the checked path would."""
    assert _answer(schema.message_decode, raw) == _answer(schema.message_decode_checked, raw)


@pytest.mark.parametrize(
    "achieved_at",
    [
        "2026-10-12T10:15:00Z",
        "2026-10-12T10:15:00.123456Z",
        "2026-10-12T12:15:00+02:00",
        "2026-10-12T10:15:00.123456+00:00",
    ],
)
def test_the_shapes_producers_send_take_the_fast_path(monkeypatch, achieved_at: str) -> None:
    def checked(raw: bytes | None) -> MatchResultMessage:
        raise AssertionError("took the checked path")

    expected = schema.message_validate(_good(achievedAt=achieved_at, board="lap-times"))
    monkeypatch.setattr(schema, "message_decode_checked", checked)
    raw = json.dumps(_good(achievedAt=achieved_at, board="lap-times")).encode()
    message = schema.message_decode(raw)
    assert message == expected
    assert message.achieved_at.tzinfo is UTC


# --- tiebreakers (contract 0.3) -----------------------------------------------------------------

_KILLS = _Board(
    board_codec(time_bits=23, resolution_seconds=1, ascending=False), ("kills", "deaths")
)


def _tiebreak_check(body: dict) -> MatchResultMessage:
    message = schema.message_decode(json.dumps(body).encode())
    schema.message_check_board(message, _season(), _KILLS)
    return message


def test_tiebreakers_with_exactly_the_boards_columns_pass_at_the_maxima() -> None:
    body = {**_good(), "points": TIEBREAK_VALUE_MAX}
    body["tiebreakers"] = {"deaths": 0, "kills": TIEBREAK_VALUE_MAX}
    message = _tiebreak_check(body)
    # In the board's column order, whatever the order sent.
    assert message.tiebreak_values(("kills", "deaths")) == [TIEBREAK_VALUE_MAX, 0]
    assert message.to_contract()["tiebreakers"] == {"deaths": 0, "kills": TIEBREAK_VALUE_MAX}
    # The checked path (non-ASCII elsewhere in the message) reads the same.
    body["displayName"] = "Zoë"
    assert _tiebreak_check(body).tiebreakers == {"deaths": 0, "kills": TIEBREAK_VALUE_MAX}


@pytest.mark.parametrize(
    ("tiebreakers", "reason"),
    [
        (None, "exactly its columns kills, deaths; got none"),
        ({"kills": 1}, "got kills"),
        ({"kills": 1, "deaths": 2, "assists": 3}, "got assists, deaths, kills"),
        ({"kills": TIEBREAK_VALUE_MAX + 1, "deaths": 0}, "tiebreakers.kills must be within"),
        ({"kills": -1, "deaths": 0}, "tiebreakers.kills must be within"),
        ({"kills": 1, "deaths": 2**70}, "tiebreakers.deaths must be within"),
        ({"kills": 1.0, "deaths": 0}, "tiebreakers.kills must be an integer"),
        ({"kills": True, "deaths": 0}, "tiebreakers.kills must be an integer"),
        ({"kills": "1", "deaths": 0}, "tiebreakers.kills must be an integer"),
        ([1, 2], "must be a JSON object of integers, got an array"),
    ],
)
def test_tiebreakers_that_do_not_fit_the_board_are_invalid(tiebreakers, reason) -> None:
    body = _good()
    if tiebreakers is not None:
        body["tiebreakers"] = tiebreakers
    with pytest.raises(MessageRejected, match=re.escape(reason)) as caught:
        _tiebreak_check(body)
    assert caught.value.code == schema.INVALID_TIEBREAKERS
    assert caught.value.field == "tiebreakers"


def test_tiebreakers_sent_to_a_board_without_columns_are_invalid() -> None:
    message = schema.message_decode(json.dumps({**_good(), "tiebreakers": {"kills": 1}}).encode())
    with pytest.raises(MessageRejected, match="ranks by points only") as caught:
        schema.message_check_board(message, _season(), _MAIN)
    assert caught.value.code == schema.INVALID_TIEBREAKERS


def test_points_past_the_codec_fit_a_tiebreak_board_up_to_the_maximum() -> None:
    body = {**_good(), "points": TIEBREAK_VALUE_MAX + 1, "tiebreakers": {"kills": 0, "deaths": 0}}
    with pytest.raises(MessageRejected) as caught:
        _tiebreak_check(body)
    assert caught.value.code == schema.POINTS_TOO_LARGE
