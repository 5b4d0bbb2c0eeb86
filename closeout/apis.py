"""The close-out's public endpoints: a closed season's final standings, and the schedules of
recurring competitions with their seasons."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from leaderboard import openapi
from leaderboard.apis import PublicApi, parse
from leaderboard.models import BOARD_SLUG_PATTERN, MAIN_BOARD
from leaderboard.serializers import (
    AttemptsField,
    ErrorSerializer,
    MetadataField,
    PlayerIdPathSerializer,
    SeasonPathSerializer,
    StrictIntegerField,
    TiebreakersField,
    TierField,
    country_field,
    display_name_field,
)
from seasons.leagues import Movement
from seasons.models import SCHEDULE_SLUG_PATTERN
from seasons.selectors import (
    ScheduleView,
    UnknownSchedule,
    schedule_get,
    schedule_list,
    schedule_seasons,
)

from .selectors import SeasonNotFinal, final_standings_list, player_history


class FinalEntrySerializer(serializers.Serializer):
    """The board's entry shape, plus the moment the score was reached."""

    rank = serializers.IntegerField()
    playerId = serializers.IntegerField(source="player_id")
    points = serializers.IntegerField()
    displayName = display_name_field(source="display_name")
    country = country_field()
    tiebreakers = TiebreakersField()
    metadata = MetadataField()
    tier = TierField()
    attempts = AttemptsField()
    movement = serializers.ChoiceField(
        choices=Movement.values,
        allow_null=True,
        required=False,
        help_text="League boards only: how the player left their tier at the close-out "
        "(null for a player in no cohort).",
    )
    reachedAt = serializers.DateTimeField(source="reached_at")

    def to_representation(self, instance: Any) -> dict[str, Any]:
        body = super().to_representation(instance)
        if "tier" not in body:
            body.pop("movement", None)
        return body


class _StandingsSchema(AutoSchema):
    """The ``limit`` bound is a setting (FINAL_STANDINGS_SIZE): read when the schema is
    generated, as the view reads it per request, not frozen at import."""

    def get_override_parameters(
        self,
    ) -> list[OpenApiParameter | serializers.Serializer | type[serializers.Serializer]]:
        limit = OpenApiParameter(
            "limit",
            {"type": "integer", "minimum": 1, "maximum": settings.FINAL_STANDINGS_SIZE},
            OpenApiParameter.QUERY,
            description=f"Entries to list, best first (default and at most "
            f"{settings.FINAL_STANDINGS_SIZE}).",
        )
        return [*super().get_override_parameters(), limit]


class SeasonStandingsApi(PublicApi):
    """GET /api/seasons/{season}/boards/{board}/standings?limit=1000: a closed season's final
    entries on one board (``/api/seasons/{season}/standings`` and
    ``/api/seasons/{season}/leaderboard/standings``: the main board)."""

    class InputSerializer(serializers.Serializer):
        limit = StrictIntegerField(required=False, min_value=1)

        def validate_limit(self, value: int) -> int:
            if value > settings.FINAL_STANDINGS_SIZE:
                raise serializers.ValidationError(
                    f"Ensure this value is less than or equal to {settings.FINAL_STANDINGS_SIZE}."
                )
            return value

    class OutputSerializer(serializers.Serializer):
        seasonId = serializers.IntegerField(source="season_id")
        entries = FinalEntrySerializer(many=True)

    schema = _StandingsSchema()

    @extend_schema(
        parameters=[openapi.SEASON, openapi.RETRY_AFTER],
        responses={
            200: OutputSerializer,
            400: OpenApiResponse(ErrorSerializer, description="A malformed season or limit."),
            404: OpenApiResponse(
                ErrorSerializer,
                description="Unknown season or board, or the season is not closed yet (the "
                "detail says which).",
            ),
            **openapi.PUBLIC_ERRORS,
        },
    )
    def get(self, request: Request, season: str, board: str = MAIN_BOARD) -> Response:
        season_id = parse(SeasonPathSerializer, {"season": season})["season"]
        query = self.InputSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        limit = query.validated_data.get("limit", settings.FINAL_STANDINGS_SIZE)
        try:
            standings = final_standings_list(season_id=season_id, limit=limit, board_slug=board)
        except SeasonNotFinal as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_404_NOT_FOUND)
        output = self.OutputSerializer({"season_id": season_id, "entries": standings})
        return Response(output.data)


class ScheduleListApi(PublicApi):
    """GET /api/schedules: every recurring competition, with its season running now and when it
    resets."""

    class ScheduleOutputSerializer(serializers.Serializer):
        slug = serializers.CharField()
        name = serializers.CharField()
        cron = serializers.CharField()
        timezone = serializers.CharField()
        active = serializers.BooleanField(help_text="False while staff have paused it.")
        currentSeasonId = serializers.IntegerField(
            source="current_season_id",
            allow_null=True,
            help_text="Its season running now; null between seasons or before the first.",
        )
        nextResetAt = serializers.DateTimeField(
            source="next_reset_at",
            allow_null=True,
            help_text="When the current season ends and the next begins (with none running, "
            "when the next begins); null when paused with no season running.",
        )
        tiers = serializers.SerializerMethodField(
            help_text="A tiered league (docs/leagues.md): its tiers, lowest first; null for a "
            "schedule without one."
        )
        promotePercent = serializers.SerializerMethodField(
            help_text="A league: the percent of each cohort moving up one tier at each "
            "close-out; null without a league."
        )
        relegatePercent = serializers.SerializerMethodField(
            help_text="A league: the percent of each cohort moving down one tier; null without "
            "a league."
        )

        @extend_schema_field({"type": "array", "items": {"type": "string"}, "nullable": True})
        def get_tiers(self, view: ScheduleView) -> list[str] | None:
            return list(view.tiers) if view.tiers else None

        @extend_schema_field({"type": "integer", "nullable": True})
        def get_promotePercent(self, view: ScheduleView) -> int | None:
            return view.promote_percent if view.tiers else None

        @extend_schema_field({"type": "integer", "nullable": True})
        def get_relegatePercent(self, view: ScheduleView) -> int | None:
            return view.relegate_percent if view.tiers else None

    @extend_schema(
        operation_id="schedules_list",
        parameters=[openapi.RETRY_AFTER],
        responses={200: ScheduleOutputSerializer(many=True), **openapi.PUBLIC_ERRORS},
    )
    def get(self, request: Request) -> Response:
        return Response(self.ScheduleOutputSerializer(schedule_list(), many=True).data)


SCHEDULE_SLUG = OpenApiParameter(
    "slug",
    {"type": "string", "pattern": SCHEDULE_SLUG_PATTERN},
    OpenApiParameter.PATH,
    description="The schedule's slug (an unknown one is 404).",
)


class ScheduleSeasonListApi(PublicApi):
    """GET /api/schedules/{slug}/seasons?limit=20: the schedule's seasons, newest first."""

    class ScheduleSeasonsQuerySerializer(serializers.Serializer):
        limit = StrictIntegerField(min_value=1, max_value=100, default=20)

    class ScheduleSeasonOutputSerializer(serializers.Serializer):
        seasonId = serializers.IntegerField(source="id")
        name = serializers.CharField()
        occurrence = serializers.IntegerField(
            help_text="The cron occurrence it belongs to (1: the first after the schedule "
            "began; a gap is an occurrence skipped while no beat ran)."
        )
        startsAt = serializers.DateTimeField(source="starts_at")
        endsAt = serializers.DateTimeField(source="ends_at")
        status = serializers.CharField()

    @extend_schema(
        operation_id="schedule_seasons",
        parameters=[
            SCHEDULE_SLUG,
            OpenApiParameter(
                "limit",
                {"type": "integer", "minimum": 1, "maximum": 100},
                OpenApiParameter.QUERY,
                description="Seasons to list (default 20).",
            ),
            openapi.RETRY_AFTER,
        ],
        responses={
            200: ScheduleSeasonOutputSerializer(many=True),
            400: OpenApiResponse(ErrorSerializer, description="A malformed limit."),
            404: OpenApiResponse(ErrorSerializer, description="Unknown schedule."),
            **openapi.PUBLIC_ERRORS,
        },
    )
    def get(self, request: Request, slug: str) -> Response:
        query = parse(self.ScheduleSeasonsQuerySerializer, request.query_params)
        schedule = schedule_get(slug=slug)
        if schedule is None:
            raise NotFound(f"schedule {slug[:40]!r} does not exist")
        seasons = schedule_seasons(schedule=schedule, limit=query["limit"])
        return Response(self.ScheduleSeasonOutputSerializer(seasons, many=True).data)


class HistoryRewardSerializer(serializers.Serializer):
    name = serializers.CharField()
    quantity = serializers.IntegerField()


class PlayerHistoryApi(PublicApi):
    """GET /api/players/{player}/history?schedule=&board=&limit=50&offset=0: the player's final
    entries on every board of every closed season (not only the top of the standings), newest
    first."""

    class HistoryQuerySerializer(serializers.Serializer):
        schedule = serializers.RegexField(SCHEDULE_SLUG_PATTERN, required=False)
        board = serializers.RegexField(BOARD_SLUG_PATTERN, required=False)
        limit = StrictIntegerField(min_value=1, max_value=100, default=50)
        offset = StrictIntegerField(min_value=0, max_value=100_000, default=0)

    class HistoryItemSerializer(serializers.Serializer):
        seasonId = serializers.IntegerField(source="season_id")
        seasonName = serializers.CharField(source="season_name")
        schedule = serializers.CharField(
            allow_null=True, help_text="The schedule that started the season, or null."
        )
        occurrence = serializers.IntegerField(allow_null=True)
        board = serializers.CharField()
        rank = serializers.IntegerField(
            help_text="As the final standings rank: the board's order, then the lower player "
            "id on an exact tie."
        )
        points = serializers.IntegerField()
        percentile = serializers.FloatField()
        total = serializers.IntegerField(help_text="Players on the board at its close.")
        endsAt = serializers.DateTimeField(source="ends_at")
        tier = serializers.CharField(
            allow_null=True,
            help_text="On a league board, the league tier the player played in (e.g. gold); "
            "null elsewhere.",
        )
        movement = serializers.ChoiceField(
            choices=Movement.values,
            allow_null=True,
            help_text="On a league board, how the player left the tier at the close-out "
            "(promoted, relegated, stayed: the tier of their next season); null elsewhere.",
        )
        reward = HistoryRewardSerializer(
            allow_null=True, help_text="What the rank was granted (reward tiers), or null."
        )

    @extend_schema(
        operation_id="player_history",
        parameters=[
            openapi.PLAYER,
            openapi.SCHEDULE_FILTER,
            OpenApiParameter(
                "board",
                {"type": "string", "pattern": BOARD_SLUG_PATTERN},
                OpenApiParameter.QUERY,
                description="Only the boards with this slug.",
            ),
            *openapi.paging(what="Entries", limit_max=100, offset_max=100_000, default=50),
            openapi.RETRY_AFTER,
        ],
        responses={
            200: HistoryItemSerializer(many=True),
            400: OpenApiResponse(ErrorSerializer, description="A malformed parameter."),
            404: OpenApiResponse(ErrorSerializer, description="Unknown schedule."),
            **openapi.PUBLIC_ERRORS,
        },
    )
    def get(self, request: Request, player: str) -> Response:
        path = parse(PlayerIdPathSerializer, {"player": player})
        query = parse(self.HistoryQuerySerializer, request.query_params)
        try:
            items = player_history(
                player_id=path["player"],
                limit=query["limit"],
                offset=query["offset"],
                schedule_slug=query.get("schedule"),
                board_slug=query.get("board"),
            )
        except UnknownSchedule as exc:
            raise NotFound(str(exc)) from exc
        return Response(self.HistoryItemSerializer(items, many=True).data)
