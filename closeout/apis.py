"""The close-out's public endpoint: a closed season's final standings."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from leaderboard.apis import PublicApi

from .selectors import SeasonNotFinal, season_final_standings_list


class FinalEntrySerializer(serializers.Serializer):
    """The board's entry shape, plus the moment the score was reached."""

    rank = serializers.IntegerField()
    playerId = serializers.IntegerField(source="player_id")
    points = serializers.IntegerField()
    reachedAt = serializers.DateTimeField(source="reached_at")


class SeasonStandingsApi(PublicApi):
    """GET /api/seasons/{season}/standings?limit=1000: a closed season's final entries."""

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

    @extend_schema(
        parameters=[InputSerializer],
        responses={
            200: OutputSerializer,
            400: OpenApiResponse(description="bad limit"),
            404: OpenApiResponse(description="unknown season, or not closed yet (with a reason)"),
        },
    )
    def get(self, request: Request, season_id: int) -> Response:
        query = self.InputSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        limit = query.validated_data.get("limit", settings.FINAL_STANDINGS_SIZE)
        try:
            standings = season_final_standings_list(season_id=season_id, limit=limit)
        except SeasonNotFinal as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_404_NOT_FOUND)
        output = self.OutputSerializer({"season_id": season_id, "entries": standings})
        return Response(output.data)
