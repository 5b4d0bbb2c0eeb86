"""The player-profile contract: bytes (or parsed JSON) -> a typed, frozen ``ProfileUpdate``.

One UTF-8 JSON object per profile on the ``player-profiles`` topic (DESIGN.md, contract 0.3)::

    {"playerId": 42, "displayName": "Alice", "country": "FR",
     "avatarUrl": "https://...", "updatedAt": "2026-12-01T10:00:00Z"}

- ``displayName``: required; 1 to 32 characters after NFC normalization (the normalized form is
  stored), no control characters (Unicode category Cc) and no line or paragraph separator;
- ``country``: ISO 3166-1 alpha-2, uppercase (players/countries.py), or null/absent;
- ``avatarUrl``: an ``https://`` URL with a host (printable ASCII), at most 512 characters, or
  null/absent;
- ``updatedAt``: RFC 3339 with seconds and an offset.

Every check lives here and only here: the Kafka consumer, the HTTP ``PUT`` and a match result's
optional ``displayName`` (``display_name_validate``) share it, so each rejects the same input
with the same reason. Rejections carry a stable ``code`` (the dead letter's ``dlq.code``
header, the HTTP 400's ``code``): the structural codes of the match-result dead letters
(``not_utf8``, ``not_json``, ``not_object``, ``missing_field``, ``wrong_type``,
``invalid_value``) and one per profile rule (``invalid_display_name``, ``invalid_country``,
``invalid_avatar_url``). Pure: no Django, no database, no network. Unknown fields are ignored.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .countries import ISO_3166_ALPHA_2

DISPLAY_NAME_MAX_CHARS = 32
AVATAR_URL_MAX_CHARS = 512
PLAYER_ID_MAX = 2**63 - 1  # PostgreSQL bigint

# Stable codes (the match-result dead letters' structural codes have the same values).
NOT_UTF8 = "not_utf8"
NOT_JSON = "not_json"
NOT_OBJECT = "not_object"
MISSING_FIELD = "missing_field"
WRONG_TYPE = "wrong_type"
INVALID_VALUE = "invalid_value"
INVALID_DISPLAY_NAME = "invalid_display_name"
INVALID_COUNTRY = "invalid_country"
INVALID_AVATAR_URL = "invalid_avatar_url"
UNEXPECTED = "unexpected_error"
# Every code a profile can be dead-lettered with.
PROFILE_CODES: tuple[str, ...] = (
    NOT_UTF8,
    NOT_JSON,
    NOT_OBJECT,
    MISSING_FIELD,
    WRONG_TYPE,
    INVALID_VALUE,
    INVALID_DISPLAY_NAME,
    INVALID_COUNTRY,
    INVALID_AVATAR_URL,
    UNEXPECTED,
)

REQUIRED_FIELDS = ("playerId", "displayName", "updatedAt")

_RFC3339 = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$"
)
# An https URL with a host (dot-separated labels), an optional port, then printable ASCII:
# the same pattern the OpenAPI schema states (non-ASCII must be percent-encoded).
AVATAR_URL_PATTERN = r"^https://[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*(:[0-9]{1,5})?([/?#][!-~]*)?$"
_AVATAR_URL = re.compile(AVATAR_URL_PATTERN)
# Line and paragraph separators are not Cc but break a line like one.
_SEPARATORS = frozenset("\u2028\u2029")
# Bidirectional embeddings, overrides and isolates: on a public board "\u202eevil" reads
# reversed, and one left open reorders what follows it. (Marks such as U+200F stay: a name
# written right to left may need them, and they reorder nothing past themselves.)
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


class ProfileRejected(ValueError):
    """The profile cannot be applied. ``reason`` is for humans; ``code`` is a stable tag."""

    def __init__(self, code: str, reason: str, *, field: str | None = None) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.field = field


@dataclass(frozen=True, slots=True)
class ProfileUpdate:
    """One decoded profile update.

    ``full``: a whole profile (the topic, the PUT): it sets the name at ``updated_at`` and
    country and avatarUrl at ``updated_at``. Not full: a match result's ``displayName``, which
    sets only the name (at the result's achievedAt) and leaves the rest as stored."""

    player_id: int
    display_name: str
    country: str | None
    avatar_url: str | None
    updated_at: datetime  # aware, UTC
    full: bool = True

    def to_contract(self) -> dict[str, Any]:
        return {
            "playerId": self.player_id,
            "displayName": self.display_name,
            "country": self.country,
            "avatarUrl": self.avatar_url,
            "updatedAt": self.updated_at.isoformat().replace("+00:00", "Z"),
        }

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_contract(), separators=(",", ":"), ensure_ascii=False).encode()


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def profile_decode(raw: bytes | None) -> ProfileUpdate:
    """Decode and validate one message value; raise ``ProfileRejected`` with the reason."""
    if raw is None:
        raise ProfileRejected(NOT_JSON, "empty message (no value)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProfileRejected(NOT_UTF8, f"value is not UTF-8: {exc}") from exc
    try:
        # Python's json: exact integers however long (a 30-digit id is out of range, not a
        # float), and no NaN. Profiles are few next to match results: no fast path.
        data = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise ProfileRejected(NOT_JSON, f"value is not JSON: {exc}") from exc
    return profile_validate(data)


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def player_id_validate(value: object, *, field: str = "playerId") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProfileRejected(
            WRONG_TYPE, f"{field} must be an integer, got {_type_name(value)}", field=field
        )
    if not 1 <= value <= PLAYER_ID_MAX:
        shown = str(value) if len(str(value)) <= 40 else f"an integer of {len(str(value))} digits"
        raise ProfileRejected(
            INVALID_VALUE, f"{field} must be 1 to {PLAYER_ID_MAX}, got {shown}", field=field
        )
    return value


def display_name_validate(value: object) -> str:
    """The display name as stored (NFC), or ``ProfileRejected`` saying why not."""
    if not isinstance(value, str):
        raise ProfileRejected(
            WRONG_TYPE,
            f"displayName must be a string, got {_type_name(value)}",
            field="displayName",
        )
    try:
        name = unicodedata.normalize("NFC", value)
    except UnicodeError as exc:  # a lone surrogate (valid JSON, not text)
        raise ProfileRejected(
            INVALID_DISPLAY_NAME, f"displayName is not valid text: {exc}", field="displayName"
        ) from exc
    if not 1 <= len(name) <= DISPLAY_NAME_MAX_CHARS:
        raise ProfileRejected(
            INVALID_DISPLAY_NAME,
            f"displayName must be 1 to {DISPLAY_NAME_MAX_CHARS} characters after NFC "
            f"normalization, got {len(name)}",
            field="displayName",
        )
    for char in name:
        category = unicodedata.category(char)
        if category == "Cc" or char in _SEPARATORS or category == "Cs" or char in _BIDI_CONTROLS:
            raise ProfileRejected(
                INVALID_DISPLAY_NAME,
                f"displayName must not contain control characters, got U+{ord(char):04X}",
                field="displayName",
            )
    # Spaces and format characters alone (a zero-width space) read as no name at all.
    if all(char.isspace() or unicodedata.category(char) == "Cf" for char in name):
        raise ProfileRejected(
            INVALID_DISPLAY_NAME,
            "displayName must contain a visible character",
            field="displayName",
        )
    return name


def country_validate(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ProfileRejected(
            WRONG_TYPE,
            f"country must be a string or null, got {_type_name(value)}",
            field="country",
        )
    if value not in ISO_3166_ALPHA_2:
        raise ProfileRejected(
            INVALID_COUNTRY,
            f"country must be an ISO 3166-1 alpha-2 code in uppercase (e.g. FR) or null, "
            f"got {value[:20]!r}",
            field="country",
        )
    return value


def avatar_url_validate(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ProfileRejected(
            WRONG_TYPE,
            f"avatarUrl must be a string or null, got {_type_name(value)}",
            field="avatarUrl",
        )
    if len(value) > AVATAR_URL_MAX_CHARS:
        raise ProfileRejected(
            INVALID_AVATAR_URL,
            f"avatarUrl must be at most {AVATAR_URL_MAX_CHARS} characters, got {len(value)}",
            field="avatarUrl",
        )
    if not _AVATAR_URL.fullmatch(value):
        raise ProfileRejected(
            INVALID_AVATAR_URL,
            f"avatarUrl must be an https:// URL with a host, or null, got {value[:60]!r}",
            field="avatarUrl",
        )
    return value


def updated_at_validate(value: object) -> datetime:
    if not isinstance(value, str):
        raise ProfileRejected(
            WRONG_TYPE, f"updatedAt must be a string, got {_type_name(value)}", field="updatedAt"
        )
    if not _RFC3339.match(value):
        raise ProfileRejected(
            INVALID_VALUE,
            "updatedAt must be an RFC 3339 date-time with an offset "
            f"(e.g. 2026-12-01T10:00:00Z), got {value[:40]!r}",
            field="updatedAt",
        )
    try:
        return datetime.fromisoformat(value.upper()).astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise ProfileRejected(
            INVALID_VALUE,
            f"updatedAt {value[:40]!r} is not a valid date-time: {exc}",
            field="updatedAt",
        ) from exc


def profile_validate(
    data: object, *, player_id: int | None = None, now: datetime | None = None
) -> ProfileUpdate:
    """Validate an already-parsed JSON value.

    ``player_id``: the id the caller already knows (the PUT's path): ``playerId`` may then be
    absent, and must equal it when present. ``now``: the PUT's default for an absent
    ``updatedAt`` (the topic requires it)."""
    if not isinstance(data, dict):
        raise ProfileRejected(NOT_OBJECT, f"value must be a JSON object, got {_type_name(data)}")
    required = [
        name
        for name in REQUIRED_FIELDS
        if not (name == "playerId" and player_id is not None)
        and not (name == "updatedAt" and now is not None)
    ]
    missing = [name for name in required if name not in data]
    if missing:
        raise ProfileRejected(
            MISSING_FIELD, f"missing field(s): {', '.join(missing)}", field=missing[0]
        )
    if "playerId" in data:
        sent = player_id_validate(data["playerId"])
        if player_id is not None and sent != player_id:
            raise ProfileRejected(
                INVALID_VALUE,
                f"playerId {sent} differs from the player {player_id} of the path",
                field="playerId",
            )
        player_id = sent
    assert player_id is not None
    display_name = display_name_validate(data["displayName"])
    country = country_validate(data.get("country"))
    avatar_url = avatar_url_validate(data.get("avatarUrl"))
    if "updatedAt" in data or now is None:
        updated_at = updated_at_validate(data["updatedAt"])
    else:
        updated_at = now.astimezone(UTC)
    return ProfileUpdate(
        player_id=player_id,
        display_name=display_name,
        country=country,
        avatar_url=avatar_url,
        updated_at=updated_at,
    )


def profile_check_not_future(profile: ProfileUpdate, *, not_after: datetime) -> None:
    """Reject a profile dated after ``not_after`` (the caller's now plus the allowed skew): the
    latest ``updatedAt`` wins, so a profile from the future (a game server's clock a year off)
    would win over every real update after it, for good."""
    if profile.updated_at > not_after:
        raise ProfileRejected(
            INVALID_VALUE,
            f"updatedAt {profile.updated_at.isoformat()} is in the future: later than "
            f"{not_after.isoformat()} (now plus the allowed clock skew)",
            field="updatedAt",
        )


def name_update(*, player_id: int, display_name: object, at: datetime) -> ProfileUpdate:
    """A match result's ``displayName`` as a name-only update at ``at`` (its achievedAt)."""
    return ProfileUpdate(
        player_id=player_id,
        display_name=display_name_validate(display_name),
        country=None,
        avatar_url=None,
        updated_at=at,
        full=False,
    )
