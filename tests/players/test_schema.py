"""The profile contract: every rule's reason code, on the bytes a producer sends."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from players import schema
from players.schema import ProfileRejected, name_update, profile_decode, profile_validate

GOOD = {
    "playerId": 42,
    "displayName": "Alice",
    "country": "FR",
    "avatarUrl": "https://cdn.example.com/a.png",
    "updatedAt": "2026-12-01T10:00:00Z",
}


def _raw(**changes: object) -> bytes:
    body = {**GOOD, **changes}
    return json.dumps({k: v for k, v in body.items() if v is not ...}).encode()


def test_a_good_profile_decodes():
    profile = profile_decode(_raw())
    assert profile.player_id == 42
    assert profile.display_name == "Alice"
    assert profile.country == "FR"
    assert profile.avatar_url == "https://cdn.example.com/a.png"
    assert profile.updated_at == datetime(2026, 12, 1, 10, tzinfo=UTC)
    assert profile.full


def test_country_and_avatar_may_be_null_or_absent():
    assert profile_decode(_raw(country=None, avatarUrl=None)).country is None
    absent = profile_decode(_raw(country=..., avatarUrl=...))
    assert (absent.country, absent.avatar_url) == (None, None)


def test_names_are_stored_nfc_normalized_and_counted_after_it():
    # "e" + combining acute (2 code points) is one character in NFC.
    decomposed = "e\u0301" * 32
    profile = profile_decode(_raw(displayName=decomposed))
    assert profile.display_name == "\u00e9" * 32


@pytest.mark.parametrize(
    ("raw", "code", "field"),
    [
        (b"\xff\xfe", schema.NOT_UTF8, None),
        (b"{not json", schema.NOT_JSON, None),
        (b"NaN", schema.NOT_JSON, None),
        (b"[1, 2]", schema.NOT_OBJECT, None),
        (_raw(displayName=...), schema.MISSING_FIELD, "displayName"),
        (_raw(updatedAt=...), schema.MISSING_FIELD, "updatedAt"),
        (_raw(playerId=...), schema.MISSING_FIELD, "playerId"),
        (_raw(playerId="42"), schema.WRONG_TYPE, "playerId"),
        (_raw(playerId=True), schema.WRONG_TYPE, "playerId"),
        (_raw(playerId=0), schema.INVALID_VALUE, "playerId"),
        (_raw(playerId=2**63), schema.INVALID_VALUE, "playerId"),
        (_raw(displayName=7), schema.WRONG_TYPE, "displayName"),
        (_raw(displayName=""), schema.INVALID_DISPLAY_NAME, "displayName"),
        (_raw(displayName="x" * 33), schema.INVALID_DISPLAY_NAME, "displayName"),
        (_raw(displayName="bad\nname"), schema.INVALID_DISPLAY_NAME, "displayName"),
        (_raw(displayName="bad\x00"), schema.INVALID_DISPLAY_NAME, "displayName"),
        (_raw(displayName="bad\u0085"), schema.INVALID_DISPLAY_NAME, "displayName"),
        (_raw(displayName="line\u2028sep"), schema.INVALID_DISPLAY_NAME, "displayName"),
        # Bidirectional overrides and isolates reorder the board's text; no visible character.
        (_raw(displayName="\u202eevil"), schema.INVALID_DISPLAY_NAME, "displayName"),
        (_raw(displayName="a\u2066b"), schema.INVALID_DISPLAY_NAME, "displayName"),
        (_raw(displayName="   "), schema.INVALID_DISPLAY_NAME, "displayName"),
        (_raw(displayName="\u200b"), schema.INVALID_DISPLAY_NAME, "displayName"),
        (_raw(displayName=" \u200b\u3000"), schema.INVALID_DISPLAY_NAME, "displayName"),
        (_raw(country="fr"), schema.INVALID_COUNTRY, "country"),
        (_raw(country="XX"), schema.INVALID_COUNTRY, "country"),
        (_raw(country="FRA"), schema.INVALID_COUNTRY, "country"),
        (_raw(country=33), schema.WRONG_TYPE, "country"),
        (_raw(avatarUrl="http://cdn.example.com/a.png"), schema.INVALID_AVATAR_URL, "avatarUrl"),
        (_raw(avatarUrl="https://"), schema.INVALID_AVATAR_URL, "avatarUrl"),
        (_raw(avatarUrl="https://a b.com/x"), schema.INVALID_AVATAR_URL, "avatarUrl"),
        (
            _raw(avatarUrl="https://cdn.example.com/" + "a" * 489),
            schema.INVALID_AVATAR_URL,
            "avatarUrl",
        ),
        (_raw(avatarUrl=5), schema.WRONG_TYPE, "avatarUrl"),
        (_raw(updatedAt="2026-12-01T10:00:00"), schema.INVALID_VALUE, "updatedAt"),
        (_raw(updatedAt="2026-12-01"), schema.INVALID_VALUE, "updatedAt"),
        (_raw(updatedAt="2026-13-01T10:00:00Z"), schema.INVALID_VALUE, "updatedAt"),
        (_raw(updatedAt=1764583200), schema.WRONG_TYPE, "updatedAt"),
    ],
)
def test_each_rule_rejects_with_its_code(raw, code, field):
    with pytest.raises(ProfileRejected) as caught:
        profile_decode(raw)
    assert caught.value.code == code
    assert caught.value.field == field
    assert caught.value.reason


def test_the_longest_avatar_url_is_accepted():
    url = "https://cdn.example.com/" + "a" * (512 - len("https://cdn.example.com/"))
    assert profile_decode(_raw(avatarUrl=url)).avatar_url == url


def test_every_official_country_is_accepted_and_a_user_assigned_one_is_not():
    from players.countries import ISO_3166_ALPHA_2

    assert len(ISO_3166_ALPHA_2) == 249
    assert {"FR", "US", "JP", "AX", "SS"} <= ISO_3166_ALPHA_2
    assert "XK" not in ISO_3166_ALPHA_2
    assert "UK" not in ISO_3166_ALPHA_2


def test_the_path_gives_the_player_and_now_the_time():
    now = datetime(2026, 12, 2, tzinfo=UTC)
    profile = profile_validate({"displayName": "Bob"}, player_id=7, now=now)
    assert (profile.player_id, profile.updated_at) == (7, now)
    with pytest.raises(ProfileRejected) as caught:
        profile_validate({"playerId": 8, "displayName": "Bob"}, player_id=7, now=now)
    assert (caught.value.code, caught.value.field) == (schema.INVALID_VALUE, "playerId")


def test_a_match_result_name_is_a_name_only_update():
    at = datetime(2026, 12, 2, tzinfo=UTC)
    update = name_update(player_id=3, display_name="Carol", at=at)
    assert (update.display_name, update.updated_at, update.full) == ("Carol", at, False)
    with pytest.raises(ProfileRejected):
        name_update(player_id=3, display_name="", at=at)


def test_names_written_right_to_left_and_emoji_sequences_are_names():
    for name in (
        "\u05d3\u05e0\u05d4",
        "\u0645\u0631\u064a\u0645\u200f",
        "\U0001f468\u200d\U0001f469",
        "a b",
    ):
        assert profile_decode(_raw(displayName=name)).display_name == name


def test_a_profile_from_the_future_is_refused():
    now = datetime(2026, 12, 1, 10, tzinfo=UTC)
    schema.profile_check_not_future(profile_decode(_raw()), not_after=now)
    with pytest.raises(ProfileRejected, match="in the future") as caught:
        schema.profile_check_not_future(
            profile_decode(_raw(updatedAt="9999-12-31T23:59:59Z")), not_after=now
        )
    assert (caught.value.code, caught.value.field) == (schema.INVALID_VALUE, "updatedAt")
