"""HTTP API of ingestion: the door for game servers that cannot speak Kafka (match results,
and player profiles: ``PUT /api/players/{player}/profile``), and what game servers do with the
same token besides: joining a tournament board
(``POST /api/seasons/{season}/boards/{board}/players/{player}/join``)."""

from __future__ import annotations

from typing import Any

import redis
from django.db import OperationalError
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ParseError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from leaderboard.models import BOARD_SLUG_PATTERN, Board
from leaderboard.selectors.boards import board_find
from leaderboard.serializers import ErrorSerializer
from leaderboard.services import (
    BOARD_FULL,
    JOIN_NOT_REQUIRED,
    SEASON_ENDED,
    JoinRefused,
    board_player_join,
)
from players.countries import ISO_3166_ALPHA_2
from players.schema import (
    AVATAR_URL_MAX_CHARS,
    AVATAR_URL_PATTERN,
    DISPLAY_NAME_MAX_CHARS,
    PLAYER_ID_MAX,
    ProfileRejected,
    profile_check_not_future,
    profile_validate,
)
from players.selectors import player_profile_get
from players.services import player_profiles_upsert
from seasons.models import Season

from .authentication import GameServerTokenAuthentication, HasActiveGameServerToken
from .parsers import BoundedJSONParser
from .schema import METADATA_MAX_BYTES, POINTS_CEILING, TIEBREAK_VALUE_MAX
from .services import (
    HTTP_MAX_RESULTS_PER_REQUEST,
    MatchResultsRejected,
    MatchResultsUnpublished,
    latest_achieved_at,
    match_results_submit,
)

# Seconds a game server should wait before re-posting when Kafka is unavailable.
RETRY_AFTER_SECONDS = 5

_BIGINT_ID = {"type": "integer", "format": "int64", "minimum": 1, "maximum": 2**63 - 1}
# One result as the door takes it (ingestion/schema.py's message_validate: the Kafka contract).
_RESULT_ITEM: dict[str, Any] = {
    "type": "object",
    "required": ["matchId", "playerId", "seasonId", "points", "achievedAt"],
    "properties": {
        "matchId": {"type": "string", "format": "uuid"},
        "playerId": _BIGINT_ID,
        "seasonId": _BIGINT_ID,
        "points": {
            "type": "integer",
            "minimum": 0,
            "maximum": POINTS_CEILING,
            "description": "At most the board's codec allows (checked against the board).",
        },
        "achievedAt": {
            "type": "string",
            "format": "date-time",
            "description": "RFC 3339 with seconds and an offset.",
        },
        "board": {"type": "string", "pattern": BOARD_SLUG_PATTERN, "default": "main"},
        "displayName": {
            "type": "string",
            "nullable": True,
            "description": "The player's name as of achievedAt (a bad one is skipped; the "
            "result counts).",
        },
        "metadata": {
            "type": "object",
            "nullable": True,
            "additionalProperties": True,
            "description": f"At most {METADATA_MAX_BYTES} bytes as compact UTF-8 JSON; kept by "
            "boards created with --metadata (invalid_metadata, metadata_too_large otherwise).",
        },
        "tiebreakers": {
            "type": "object",
            "nullable": True,
            "additionalProperties": {
                "type": "integer",
                "minimum": 0,
                "maximum": TIEBREAK_VALUE_MAX,
            },
            "description": "Required by a board with tie-break columns, with exactly its "
            "columns (its points may then go up to the same maximum); refused by any other "
            "board (invalid_tiebreakers).",
        },
    },
    # Producers may add fields before consumers know them; they are ignored.
    "additionalProperties": True,
}
# The body: one result, or a list of 1 to HTTP_MAX_RESULTS_PER_REQUEST (not {"results": ...}:
# that key is only the serializer's name for the list).
_REQUEST_BODY: dict[str, Any] = {
    "oneOf": [
        _RESULT_ITEM,
        {
            "type": "array",
            "items": _RESULT_ITEM,
            "minItems": 1,
            "maxItems": HTTP_MAX_RESULTS_PER_REQUEST,
        },
    ],
}


class RejectedItemSerializer(serializers.Serializer):
    class Meta:
        ref_name = "MatchResultRejectedItem"

    index = serializers.IntegerField()
    code = serializers.CharField()
    field = serializers.CharField(allow_null=True)
    reason = serializers.CharField()


class MatchResultsSubmitApi(APIView):
    """``POST /api/match-results``: one result object, or a JSON list of up to 1000.

    Every item is validated as the Kafka consumer validates messages; one bad item rejects the
    request (400, each bad item's index and reason) and nothing is published. Otherwise every
    item is published to the match-results topic and acknowledged by Kafka before the 202.
    Re-posting a request after a timeout is safe: duplicates count once.
    """

    authentication_classes = [GameServerTokenAuthentication]
    permission_classes = [HasActiveGameServerToken]
    # Size-capped (413) and depth-capped (400) JSON: DRF's parser reads any size and recursed.
    parser_classes = [BoundedJSONParser]

    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "MatchResultsSubmitInput"

        # Items stay raw JSON here: the ingestion schema validates them, with the same reasons
        # the consumer would dead-letter them for.
        results = serializers.ListField(
            child=serializers.JSONField(),
            allow_empty=False,
            max_length=HTTP_MAX_RESULTS_PER_REQUEST,
        )

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "MatchResultsSubmitOutput"

        accepted = serializers.IntegerField()

    class RejectedOutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "MatchResultsSubmitRejected"

        detail = serializers.CharField()
        invalid = RejectedItemSerializer(many=True)

    class DetailOutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "MatchResultsSubmitError"

        detail = serializers.CharField()

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "Retry-After",
                OpenApiTypes.INT,
                OpenApiParameter.HEADER,
                response=[503],
                description="Seconds to wait before re-posting.",
            )
        ],
        request={"application/json": _REQUEST_BODY},
        description=(
            "Each item is also checked against its season and board (they exist, the season "
            "takes results, achievedAt lies in its window and not later than now plus "
            "INGEST_MAX_FUTURE_SKEW_SECONDS, the points fit the board): a schema-valid body can "
            "still be a 400 that lists each rejected item's index, code and reason."
        ),
        responses={
            202: OutputSerializer,
            400: RejectedOutputSerializer,
            401: OpenApiResponse(description="no or malformed Bearer token, or an unknown one"),
            403: OpenApiResponse(description="the token has been deactivated"),
            413: OpenApiResponse(
                DetailOutputSerializer,
                description="the body is larger than INGEST_HTTP_MAX_BODY_BYTES (default 1 MiB); "
                "nothing was parsed or published",
            ),
            415: OpenApiResponse(
                DetailOutputSerializer, description="Content-Type is not application/json"
            ),
            503: OpenApiResponse(
                DetailOutputSerializer,
                description="Kafka did not acknowledge, or PostgreSQL (the token lookup) cannot "
                "be reached; retry the whole request after Retry-After seconds",
            ),
        },
    )
    def post(self, request: Request) -> Response:
        try:
            body: Any = request.data
        except ParseError as exc:
            # Not JSON, not UTF-8, or nested too deep: the 400 shape of every rejected body.
            payload: dict[str, Any] = {
                "detail": f"the body is not valid JSON ({exc.detail})",
                "invalid": [],
            }
            return Response(
                self.RejectedOutputSerializer(payload).data, status=status.HTTP_400_BAD_REQUEST
            )
        items = body if isinstance(body, list) else [body]
        serializer = self.InputSerializer(data={"results": items})
        if not serializer.is_valid():
            problems = "; ".join(str(m) for m in serializer.errors.get("results", []))
            payload = {
                "detail": "the body must be a result object or a non-empty list of at most "
                f"{HTTP_MAX_RESULTS_PER_REQUEST} ({problems})",
                "invalid": [],
            }
            return Response(
                self.RejectedOutputSerializer(payload).data, status=status.HTTP_400_BAD_REQUEST
            )
        try:
            accepted = match_results_submit(items=serializer.validated_data["results"])
        except MatchResultsRejected as exc:
            payload = {
                "detail": f"{len(exc.rejected)} of {len(items)} result(s) are invalid; "
                "nothing was published",
                "invalid": exc.rejected,
            }
            return Response(
                self.RejectedOutputSerializer(payload).data, status=status.HTTP_400_BAD_REQUEST
            )
        except MatchResultsUnpublished:
            return Response(
                {"detail": "results could not be published; retry the whole request later"},
                status=status.HTTP_503_SERVICE_UNAVAILABLE,
                headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
            )
        return Response(
            self.OutputSerializer({"accepted": accepted}).data, status=status.HTTP_202_ACCEPTED
        )


class PlayerProfileOutputSerializer(serializers.Serializer):
    class Meta:
        ref_name = "StoredPlayerProfile"

    playerId = serializers.IntegerField(source="player_id")
    displayName = serializers.CharField(
        source="visible_name",
        allow_null=True,
        help_text="Null while staff hide the name, as in every other read.",
    )
    country = serializers.CharField(allow_null=True)
    avatarUrl = serializers.CharField(source="avatar_url", allow_null=True)
    updatedAt = serializers.DateTimeField(source="profile_updated_at")
    hidden = serializers.BooleanField(
        help_text="Staff hid the name: every read shows null for it until they unhide it."
    )


_PROFILE_BODY: dict[str, Any] = {
    "type": "object",
    "required": ["displayName"],
    "properties": {
        "displayName": {
            "type": "string",
            "minLength": 1,
            "maxLength": DISPLAY_NAME_MAX_CHARS,
            "pattern": "^[^\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029]+$",
            "description": f"1 to {DISPLAY_NAME_MAX_CHARS} characters after NFC normalization, "
            "no control characters.",
        },
        "country": {
            "type": "string",
            "nullable": True,
            "enum": [*sorted(ISO_3166_ALPHA_2), None],
            "description": "ISO 3166-1 alpha-2 (uppercase), or null.",
        },
        "avatarUrl": {
            "type": "string",
            "nullable": True,
            "maxLength": AVATAR_URL_MAX_CHARS,
            "pattern": AVATAR_URL_PATTERN,
            "description": "An https:// URL, or null.",
        },
        "updatedAt": {
            "type": "string",
            "format": "date-time",
            "description": "RFC 3339 with an offset; default: now. The latest updatedAt wins.",
        },
    },
    # playerId may be sent too (it must then equal the path's), and fields producers add.
    "additionalProperties": True,
}


class PlayerProfileRejectedSerializer(serializers.Serializer):
    class Meta:
        ref_name = "PlayerProfileRejected"

    detail = serializers.CharField()
    code = serializers.CharField()
    field = serializers.CharField(allow_null=True)


class PlayerProfilePutApi(APIView):
    """``PUT /api/players/{player}/profile``: the player-profiles topic's update, over HTTP.

    Validated as the consumer validates a profile (players/schema.py: the same reasons),
    stored with the same upsert (the latest updatedAt wins: an older one is accepted and
    changes nothing), and answered with the profile as stored.
    """

    authentication_classes = [GameServerTokenAuthentication]
    permission_classes = [HasActiveGameServerToken]
    parser_classes = [BoundedJSONParser]

    @extend_schema(
        operation_id="player_profile_put",
        parameters=[
            OpenApiParameter("player", _BIGINT_ID, OpenApiParameter.PATH, description="Player id.")
        ],
        request={"application/json": _PROFILE_BODY},
        responses={
            200: PlayerProfileOutputSerializer,
            400: PlayerProfileRejectedSerializer,
            401: OpenApiResponse(description="no or malformed Bearer token, or an unknown one"),
            403: OpenApiResponse(description="the token has been deactivated"),
            # leaderboard_project/middleware.py, before the route and the token are looked at.
            404: OpenApiResponse(
                ErrorSerializer,
                description="the path holds a control character: it names no player",
            ),
            413: OpenApiResponse(
                ErrorSerializer,
                description="the body is larger than INGEST_HTTP_MAX_BODY_BYTES (default 1 MiB); "
                "nothing was parsed or stored",
            ),
            415: OpenApiResponse(
                ErrorSerializer, description="Content-Type is not application/json"
            ),
            503: OpenApiResponse(
                ErrorSerializer,
                description="PostgreSQL or Redis (the name cache) cannot be reached; PUT the "
                "same profile again after Retry-After seconds (it is idempotent)",
            ),
        },
    )
    def put(self, request: Request, player: str) -> Response:
        def rejected(detail: str, code: str, field: str | None) -> Response:
            body = {"detail": detail, "code": code, "field": field}
            return Response(
                PlayerProfileRejectedSerializer(body).data, status=status.HTTP_400_BAD_REQUEST
            )

        # The length first: int() refuses more than 4,300 digits (a 500).
        if not (player.isascii() and player.isdigit() and len(player) <= 19) or not (
            1 <= int(player) <= PLAYER_ID_MAX
        ):
            return rejected(
                f"player must be a player id, got {player[:40]!r}", "invalid_value", None
            )
        try:
            body: Any = request.data
        except ParseError as exc:
            return rejected(f"the body is not valid JSON ({exc.detail})", "not_json", None)
        try:
            update = profile_validate(body, player_id=int(player), now=timezone.now())
            profile_check_not_future(update, not_after=latest_achieved_at())
        except ProfileRejected as exc:
            return rejected(exc.reason, exc.code, exc.field)
        try:
            player_profiles_upsert(profiles=[update])
            stored = player_profile_get(player_id=update.player_id)
        except (redis.exceptions.RedisError, OperationalError) as exc:
            return Response(
                {"detail": f"the profile could not be stored; retry ({type(exc).__name__})"},
                status=status.HTTP_503_SERVICE_UNAVAILABLE,
                headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
            )
        return Response(PlayerProfileOutputSerializer(stored).data)


class JoinOutputSerializer(serializers.Serializer):
    class Meta:
        ref_name = "BoardJoined"

    seasonId = serializers.IntegerField(source="season_id")
    board = serializers.CharField()
    playerId = serializers.IntegerField(source="player_id")
    joined = serializers.BooleanField(
        help_text="True: joined by this call (201); false: the player had joined before (200)."
    )
    joinedAt = serializers.DateTimeField(source="joined_at")
    participants = serializers.IntegerField(help_text="Players on the board now.")
    maxSize = serializers.IntegerField(
        source="max_size", allow_null=True, help_text="Its seats (--max-size); null: unlimited."
    )


class JoinRefusedSerializer(serializers.Serializer):
    """A 409: the join was refused, and ``code`` says why (a client branches on it)."""

    class Meta:
        ref_name = "JoinRefused"

    detail = serializers.CharField()
    code = serializers.ChoiceField(choices=[BOARD_FULL, JOIN_NOT_REQUIRED, SEASON_ENDED])


class JoinErrorSerializer(serializers.Serializer):
    """A 400, 404 or 503. ``code`` is optional: a 404 for a path no route takes (a slug with a
    control character) comes from the URL resolver, before this view, with a detail only."""

    class Meta:
        ref_name = "JoinError"

    detail = serializers.CharField()
    code = serializers.ChoiceField(
        choices=["invalid_value", "not_found", "database_unavailable"],
        required=False,
        help_text="400: invalid_value; 404: not_found; 503: database_unavailable.",
    )


class BoardPlayerJoinApi(APIView):
    """``POST /api/seasons/{season}/boards/{board}/players/{player}/join``: a game server seats a
    player on a tournament board (docs/tournaments.md). Idempotent: a player who joined is told
    so (200), and a retry after a lost answer never takes a second seat."""

    authentication_classes = [GameServerTokenAuthentication]
    permission_classes = [HasActiveGameServerToken]

    @extend_schema(
        operation_id="board_player_join",
        summary="Join a player to a tournament board (a board created with --join-required)",
        parameters=[
            OpenApiParameter("season", _BIGINT_ID, OpenApiParameter.PATH, description="Season id."),
            OpenApiParameter(
                "board",
                {"type": "string", "pattern": BOARD_SLUG_PATTERN},
                OpenApiParameter.PATH,
                description="The board's slug.",
            ),
            OpenApiParameter("player", _BIGINT_ID, OpenApiParameter.PATH, description="Player id."),
        ],
        request=None,
        responses={
            201: OpenApiResponse(JoinOutputSerializer, description="joined by this call"),
            200: OpenApiResponse(JoinOutputSerializer, description="the player had joined"),
            400: OpenApiResponse(JoinErrorSerializer, description="a malformed season or player"),
            401: OpenApiResponse(description="no or malformed Bearer token, or an unknown one"),
            403: OpenApiResponse(description="the token has been deactivated"),
            404: OpenApiResponse(JoinErrorSerializer, description="unknown season or board"),
            409: OpenApiResponse(
                JoinRefusedSerializer,
                description="board_full (every seat taken), join_not_required (the board "
                "counts every player's results), season_ended (the season ended or closed)",
            ),
            503: OpenApiResponse(
                JoinErrorSerializer,
                description="PostgreSQL cannot be reached; POST again after Retry-After seconds "
                "(it is idempotent)",
            ),
        },
    )
    def post(self, request: Request, season: str, board: str, player: str) -> Response:
        def refused(http_status: int, code: str, detail: str) -> Response:
            return Response({"detail": detail, "code": code}, status=http_status)

        for name, value in (("season", season), ("player", player)):
            if not (value.isascii() and value.isdigit() and len(value) <= 19) or not (
                1 <= int(value) <= PLAYER_ID_MAX
            ):
                return refused(
                    status.HTTP_400_BAD_REQUEST,
                    "invalid_value",
                    f"{name} must be a positive integer id, got {value[:40]!r}",
                )
        season_id, player_id = int(season), int(player)
        try:
            ref = board_find(season_id=season_id, slug=board[:40])
            if ref is None:
                what = (
                    f"season {season_id} has no board {board[:40]!r}"
                    if Season.objects.filter(id=season_id).exists()
                    else f"season {season_id} does not exist"
                )
                return refused(status.HTTP_404_NOT_FOUND, "not_found", what)
            outcome = board_player_join(board_id=ref.id, player_id=player_id)
        except Board.DoesNotExist:
            return refused(
                status.HTTP_404_NOT_FOUND, "not_found", f"season {season_id} has no board {board!r}"
            )
        except JoinRefused as exc:
            return refused(status.HTTP_409_CONFLICT, exc.code, exc.detail)
        except OperationalError as exc:
            return Response(
                {
                    "detail": f"the join could not be stored; retry ({type(exc).__name__})",
                    "code": "database_unavailable",
                },
                status=status.HTTP_503_SERVICE_UNAVAILABLE,
                headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
            )
        body = {
            "season_id": season_id,
            "board": ref.slug,
            "player_id": player_id,
            "joined": outcome.joined,
            "joined_at": outcome.joined_at,
            "participants": outcome.participants,
            "max_size": outcome.max_size,
        }
        return Response(
            JoinOutputSerializer(body).data,
            status=status.HTTP_201_CREATED if outcome.joined else status.HTTP_200_OK,
        )
