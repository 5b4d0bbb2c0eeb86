"""Input (query and path parameters) and output serializers of the read API."""

from __future__ import annotations

import re
from datetime import date
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from seasons.leagues import Movement

from .models import COHORT_SIZE_MAX
from .selectors.cohorts import CohortStanding
from .selectors.rankings import NOT_KEPT, PlayerStanding, RankingEntry
from .selectors.top import TOP_SNAPSHOT_SIZE

# Player ids are positive integers that fit PostgreSQL's bigint.
MAX_ID = 2**63 - 1
# Digits of MAX_ID: longer input is refused before int() (Python refuses over 4,300 digits with
# a ValueError, and converting a long string costs quadratic time).
_MAX_ID_DIGITS = len(str(MAX_ID))
MAX_FRIENDS = 200
MAX_RADIUS = 100
MAX_PAGE = 1000
# The deepest 1-based position a page may start at. The page's last 0-based position
# (start + count - 2) then stays below 2^53: an exact integer in a Lua number (a double) and in
# Redis's range arguments, and far beyond any board. 2^63 - 1 overflowed there (a 500).
MAX_START = 2**53 - MAX_PAGE

_DIGITS = re.compile(r"[0-9]+")
_INTEGER = re.compile(r"-?[0-9]+")
_ISO_WEEK = re.compile(r"([0-9]{4})-W([0-9]{2})")
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def day_parse(value: str) -> date:
    """A UTC day as YYYY-MM-DD (the API's day paths and the board page's ``?day=``)."""
    try:
        # fromisoformat alone takes 20261012xx, 2026101299 and 2026-W41-1 as days.
        if not _DAY.fullmatch(value):
            raise ValueError
        day = date.fromisoformat(value)
    except ValueError:
        raise serializers.ValidationError(f"must be a date as YYYY-MM-DD, got {value!r}") from None
    if day == date.max:
        # Its board ends at the next midnight, past datetime's range (building it was a 500).
        raise serializers.ValidationError(f"must be a day before {date.max}, got {value!r}")
    return day


def iso_week_parse(value: str) -> tuple[int, int]:
    """An ISO week as YYYY-Www, as (ISO year, week) (the API's week paths and ``?week=``)."""
    match = _ISO_WEEK.fullmatch(value)
    try:
        if match is None:
            raise ValueError
        iso_year, iso_week = int(match[1]), int(match[2])
        # The Sunday too: a week must lie whole inside datetime's range (9999-W52 ends in
        # year 10000, and building its board overflowed: a 500).
        date.fromisocalendar(iso_year, iso_week, 7)
    except ValueError:
        raise serializers.ValidationError(
            f"must be an ISO week as YYYY-Www with a week that exists that year, got {value!r}"
        ) from None
    return iso_year, iso_week


class IdField(serializers.Field):
    """A positive decimal integer, digits only: '12.0', ' 12', '+12' and '1e3' are rejected."""

    default_error_messages = {
        "invalid": "must be a positive integer (digits only), got {value!r}",
    }

    def to_internal_value(self, data: Any) -> int:
        text = str(data)
        if (
            len(text) > _MAX_ID_DIGITS
            or not _DIGITS.fullmatch(text)
            or not 1 <= int(text) <= MAX_ID
        ):
            self.fail("invalid", value=text)
        return int(text)

    def to_representation(self, value: int) -> int:
        return value


class StrictIntegerField(serializers.IntegerField):
    """DRF's IntegerField, minus its leniency: '12.0' or ' 12' is malformed, not 12."""

    def to_internal_value(self, data: Any) -> int:
        if not _INTEGER.fullmatch(str(data)):
            self.fail("invalid")
        return super().to_internal_value(data)


class SeasonPathSerializer(serializers.Serializer):
    season = IdField()


class PlayerIdPathSerializer(serializers.Serializer):
    player = IdField()


class PlayerPathSerializer(serializers.Serializer):
    season = IdField()
    player = IdField()


class TopQuerySerializer(serializers.Serializer):
    limit = StrictIntegerField(min_value=1, max_value=TOP_SNAPSHOT_SIZE, default=100)


class AroundQuerySerializer(serializers.Serializer):
    radius = StrictIntegerField(min_value=0, max_value=MAX_RADIUS, default=5)


class RanksQuerySerializer(serializers.Serializer):
    start = StrictIntegerField(min_value=1, max_value=MAX_START, default=1)
    count = StrictIntegerField(min_value=1, max_value=MAX_PAGE, default=100)


class FriendsQuerySerializer(serializers.Serializer):
    ids = serializers.CharField(
        help_text=f"Comma-separated player ids, at most {MAX_FRIENDS}.", trim_whitespace=True
    )

    def validate_ids(self, value: str) -> list[int]:
        field = IdField()
        ids: list[int] = []
        seen: set[int] = set()
        for part in value.split(","):
            player_id = field.to_internal_value(part.strip())
            if player_id not in seen:
                seen.add(player_id)
                ids.append(player_id)
        if len(ids) > MAX_FRIENDS:
            raise serializers.ValidationError(f"at most {MAX_FRIENDS} distinct ids, got {len(ids)}")
        return ids


class DayPathSerializer(serializers.Serializer):
    season = IdField()
    day = serializers.CharField(help_text="A UTC day, YYYY-MM-DD.")

    def validate_day(self, value: str) -> date:
        return day_parse(value)


class WeekPathSerializer(serializers.Serializer):
    season = IdField()
    week = serializers.CharField(help_text="An ISO week, YYYY-Www (e.g. 2026-W41).")

    def validate_week(self, value: str) -> tuple[int, int]:
        return iso_week_parse(value)


_DISPLAY_NAME_HELP = "The player's display name; null when unknown or hidden by staff."
_COUNTRY_HELP = "ISO 3166-1 alpha-2; null when unknown (a hidden name keeps its country)."


def display_name_field(**kwargs: Any) -> serializers.CharField:
    return serializers.CharField(allow_null=True, help_text=_DISPLAY_NAME_HELP, **kwargs)


def country_field(**kwargs: Any) -> serializers.CharField:
    return serializers.CharField(
        allow_null=True, min_length=2, max_length=2, help_text=_COUNTRY_HELP, **kwargs
    )


class _KeptOnly:
    """A field present (its value, or null) on the boards that keep it, left out where the
    value is NOT_KEPT (contract 0.3)."""

    def get_attribute(self, instance: Any) -> Any:
        value = super().get_attribute(instance)  # type: ignore[misc]
        if value is NOT_KEPT:
            raise serializers.SkipField()
        return value


class MetadataField(_KeptOnly, serializers.JSONField):
    """An entry's ``metadata``: present (an object, or null) on a board that keeps metadata,
    left out elsewhere (contract 0.3)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault(
            "help_text",
            "Boards created with --metadata only: the metadata of the result that gives the "
            "player's value (null when it had none).",
        )
        super().__init__(required=False, allow_null=True, **kwargs)


class TiebreakersField(serializers.DictField):
    """An entry's ``tiebreakers``: the value of each of the board's tie-break columns, on a
    board ranked by them; left out elsewhere (contract 0.3)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault(
            "help_text",
            "Boards with tie-break columns only: the player's value of each column, by name, "
            "in the board's order (ranked after points, then the earliest time).",
        )
        super().__init__(child=serializers.IntegerField(), required=False, **kwargs)

    def get_attribute(self, instance: Any) -> Any:
        value = super().get_attribute(instance)
        if value is None:
            raise serializers.SkipField()
        return value


class TierField(_KeptOnly, serializers.CharField):
    """An entry's ``tier``: present (a tier name, or null) on a league board, left out
    elsewhere (contract 0.3, tiered leagues)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault(
            "help_text",
            "League boards only (a schedule's board with cohorts, docs/leagues.md): the "
            "player's league tier (e.g. gold); null while they are in no cohort yet.",
        )
        super().__init__(required=False, allow_null=True, **kwargs)


class CohortNumberField(_KeptOnly, serializers.IntegerField):
    """A card row's ``cohort``: present (a number, or null) on a board with cohorts, left out
    elsewhere (contract 0.3, cohorts)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault(
            "help_text",
            "Boards with cohorts only (--cohort-size, docs/cohorts.md): the number of the "
            "player's cohort on the board, from 1; null while they are in none (a league board "
            "waiting for the previous season's close-out).",
        )
        super().__init__(required=False, allow_null=True, min_value=1, **kwargs)


class ProjectedMovementField(serializers.ChoiceField):
    """A cohort entry's ``movement`` on a league board: where the member would go if the season
    ended now; left out elsewhere."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault(
            "help_text",
            "League boards only: how the player would leave the tier if the season ended now "
            "(promoted, relegated, stayed); the close-out decides, from PostgreSQL.",
        )
        super().__init__(choices=Movement.values, required=False, **kwargs)

    def get_attribute(self, instance: Any) -> Any:
        value = super().get_attribute(instance)
        if value is None:
            raise serializers.SkipField()
        return value


class AttemptsField(serializers.IntegerField):
    """An entry's ``attempts``: present on a board with max-attempts, left out elsewhere
    (contract 0.3, tournaments)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault(
            "help_text",
            "Boards created with --max-attempts only: the player's attempts used (distinct "
            "matches counted on the board).",
        )
        super().__init__(required=False, min_value=0, **kwargs)

    def get_attribute(self, instance: Any) -> Any:
        value = super().get_attribute(instance)
        if value is None:
            raise serializers.SkipField()
        return value


def entry_metadata_into(
    body: dict[str, Any],
    metadata: Any,
    tiebreakers: dict[str, int] | None = None,
    tier: Any = NOT_KEPT,
    attempts: int | None = None,
) -> dict[str, Any]:
    """``body`` with ``metadata`` where the board keeps metadata (as MetadataField decides),
    ``tiebreakers`` where it has tie-break columns (as TiebreakersField), ``tier`` on a
    league board (as TierField) and ``attempts`` on a board with max-attempts (as
    AttemptsField)."""
    if tiebreakers is not None:
        body["tiebreakers"] = tiebreakers
    if metadata is not NOT_KEPT:
        body["metadata"] = metadata
    if tier is not NOT_KEPT:
        body["tier"] = tier
    if attempts is not None:
        body["attempts"] = attempts
    return body


class RankingEntrySerializer(serializers.Serializer):
    rank = serializers.IntegerField(help_text="1-based; equal scores share a rank.")
    playerId = serializers.IntegerField(source="player_id")
    points = serializers.IntegerField()
    displayName = display_name_field(source="display_name")
    country = country_field()
    tiebreakers = TiebreakersField()
    metadata = MetadataField()
    tier = TierField()
    attempts = AttemptsField()

    def to_representation(self, instance: RankingEntry) -> dict[str, Any]:
        # The declared fields document the shape (and the schema); DRF's generic per-field
        # walk cost more than the Redis read on the hot lists, so the dict is built directly.
        # tests/leaderboard/test_serializers.py holds the two to the same output.
        return entry_body(instance)


def entry_body(entry: RankingEntry) -> dict[str, Any]:
    """What RankingEntrySerializer answers for ``entry``."""
    body = {
        "rank": entry.rank,
        "playerId": entry.player_id,
        "points": entry.points,
        "displayName": entry.display_name,
        "country": entry.country,
    }
    return entry_metadata_into(body, entry.metadata, entry.tiebreakers, entry.tier, entry.attempts)


class PlayerStandingSerializer(serializers.Serializer):
    rank = serializers.IntegerField(source="entry.rank")
    playerId = serializers.IntegerField(source="entry.player_id")
    points = serializers.IntegerField(source="entry.points")
    displayName = display_name_field(source="entry.display_name")
    country = country_field(source="entry.country")
    tiebreakers = TiebreakersField(source="entry.tiebreakers")
    metadata = MetadataField(source="entry.metadata")
    tier = TierField(source="entry.tier")
    attempts = AttemptsField(source="entry.attempts")
    total = serializers.IntegerField(help_text="Players on the board.")
    percentile = serializers.FloatField(
        help_text="Share of the board ranked at or below the player, in percent."
    )
    pointsToNextRank = serializers.IntegerField(
        source="points_to_next_rank",
        allow_null=True,
        help_text="Points to add to pass the next player up; null at rank 1.",
    )

    def to_representation(self, instance: PlayerStanding) -> dict[str, Any]:
        # As RankingEntrySerializer: built directly, held equal to the fields by a test.
        return {
            "rank": instance.entry.rank,
            "playerId": instance.entry.player_id,
            "points": instance.entry.points,
            "displayName": instance.entry.display_name,
            "country": instance.entry.country,
            **entry_metadata_into(
                {},
                instance.entry.metadata,
                instance.entry.tiebreakers,
                instance.entry.tier,
                instance.entry.attempts,
            ),
            "total": instance.total,
            "percentile": instance.percentile,
            "pointsToNextRank": instance.points_to_next_rank,
        }


class CohortPathSerializer(serializers.Serializer):
    season = IdField()
    cohort = IdField()


class CohortTopQuerySerializer(serializers.Serializer):
    limit = StrictIntegerField(min_value=1, max_value=COHORT_SIZE_MAX, default=50)


class CohortEntrySerializer(serializers.Serializer):
    rank = serializers.IntegerField(help_text="1-based within the cohort; equal keys share one.")
    globalRank = serializers.IntegerField(
        source="global_rank", help_text="The player's rank on the whole board."
    )
    playerId = serializers.IntegerField(source="entry.player_id")
    points = serializers.IntegerField(source="entry.points")
    displayName = display_name_field(source="entry.display_name")
    country = country_field(source="entry.country")
    tiebreakers = TiebreakersField(source="entry.tiebreakers")
    metadata = MetadataField(source="entry.metadata")
    tier = TierField(source="entry.tier")
    attempts = AttemptsField(source="entry.attempts")
    movement = ProjectedMovementField()


class CohortSerializer(serializers.Serializer):
    cohort = serializers.IntegerField(
        source="number", help_text="The cohort's number on the board, from 1."
    )
    size = serializers.IntegerField(help_text="How many players a cohort takes (--cohort-size).")
    members = serializers.IntegerField(
        help_text="Players in the cohort now (one without a score is not among the entries)."
    )
    tier = serializers.CharField(
        allow_null=True,
        help_text="The league tier of its members (e.g. gold) on a league board; null elsewhere.",
    )
    entries = CohortEntrySerializer(many=True)

    def to_representation(self, instance: CohortStanding) -> dict[str, Any]:
        # Built directly like the entries (RankingEntrySerializer), held equal by a test.
        entries = []
        for item in instance.entries:
            body = entry_body(item.entry)
            body["rank"] = item.rank
            body["globalRank"] = item.global_rank
            if item.movement is not None:
                body["movement"] = item.movement
            entries.append(body)
        return {
            "cohort": instance.number,
            "size": instance.size,
            "members": instance.members,
            "tier": instance.tier,
            "entries": entries,
        }


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()
    errors = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField()), required=False
    )
    code = serializers.ChoiceField(
        choices=[
            "database_unavailable",
            "redis_unavailable",
            "board_recovering",
            "week_unavailable",
        ],
        required=False,
        help_text="On a 503: why the answer must wait (leaderboard/unavailable.py).",
    )


# The player card (selectors.cards)


class CardBoardSerializer(serializers.Serializer):
    seasonId = serializers.IntegerField(source="season_id")
    board = serializers.CharField()
    rank = serializers.IntegerField(min_value=1)
    points = serializers.IntegerField()
    percentile = serializers.FloatField(
        help_text="Share of the board's players ranked at or below the player, in percent "
        "(100 * (size - rank + 1) / size, two decimals): rank 1 is 100.0."
    )
    tier = TierField()
    cohort = CohortNumberField()


class CardBoardRecoveringSerializer(serializers.Serializer):
    seasonId = serializers.IntegerField()
    board = serializers.CharField()


class PlayerCardSerializer(serializers.Serializer):
    playerId = serializers.IntegerField(source="player_id")
    displayName = serializers.CharField(
        source="display_name", allow_null=True, help_text="Null when unknown or hidden by staff."
    )
    country = serializers.CharField(allow_null=True, help_text="ISO 3166-1 alpha-2, or null.")
    avatarUrl = serializers.CharField(source="avatar_url", allow_null=True)
    boards = CardBoardSerializer(many=True)
    recovering = serializers.SerializerMethodField(
        help_text="Boards of active seasons being recovered from PostgreSQL right now (each "
        "board's reads answer 503 meanwhile): the player's standing there is not known, not "
        "absent. Usually empty."
    )
    history = serializers.SerializerMethodField(
        help_text="Where the player's final entries of closed seasons are listed."
    )

    @extend_schema_field(CardBoardRecoveringSerializer(many=True))
    def get_recovering(self, card: Any) -> list[dict[str, Any]]:
        return [{"seasonId": season, "board": board} for season, board in card.recovering]

    def get_history(self, card: Any) -> str:
        return f"/api/players/{card.player_id}/history"
