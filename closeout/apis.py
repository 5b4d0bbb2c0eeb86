"""The close-out's public endpoint: a closed season's final standings."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from leaderboard import openapi
from leaderboard.apis import PublicApi
from leaderboard.models import MAIN_BOARD
from leaderboard.serializers import (
    ErrorSerializer,
    MetadataField,
    TiebreakersField,
    country_field,
    display_name_field,
)

from .selectors import SeasonNotFinal, final_standings_list


class FinalEntrySerializer(serializers.Serializer):
    """The board's entry shape, plus the moment the score was reached."""

    rank = serializers.IntegerField()
    playerId = serializers.IntegerField(source="player_id")
    points = serializers.IntegerField()
    displayName = display_name_field(source="display_name")
    country = country_field()
    tiebreakers = TiebreakersField()
    metadata = MetadataField()
    reachedAt = serializers.DateTimeField(source="reached_at")


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
    entries on one board (``/api/seasons/{season}/standings``: the main board)."""

    class InputSerializer(serializers.Serializer):
        limit = serializers.IntegerField(required=False, min_value=1)

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
        parameters=[openapi.path_id("season_id", "The season's id."), openapi.RETRY_AFTER],
        responses={
            200: OutputSerializer,
            400: OpenApiResponse(ErrorSerializer, description="A malformed limit."),
            404: OpenApiResponse(
                ErrorSerializer,
                description="Unknown season or board, or the season is not closed yet (the "
                "detail says which).",
            ),
            **openapi.PUBLIC_ERRORS,
        },
    )
    def get(self, request: Request, season_id: int, board: str = MAIN_BOARD) -> Response:
        query = self.InputSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        limit = query.validated_data.get("limit", settings.FINAL_STANDINGS_SIZE)
        try:
            standings = final_standings_list(season_id=season_id, limit=limit, board_slug=board)
        except SeasonNotFinal as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_404_NOT_FOUND)
        output = self.OutputSerializer({"season_id": season_id, "entries": standings})
        return Response(output.data)
