"""HTTP API of ingestion: the door for game servers that cannot speak Kafka."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ParseError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from .authentication import GameServerTokenAuthentication, HasActiveGameServerToken
from .parsers import BoundedJSONParser
from .services import (
    HTTP_MAX_RESULTS_PER_REQUEST,
    MatchResultsRejected,
    MatchResultsUnpublished,
    match_results_submit,
)

# Seconds a game server should wait before re-posting when Kafka is unavailable.
RETRY_AFTER_SECONDS = 5


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
        request=InputSerializer,
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
            503: OpenApiResponse(description="Kafka did not acknowledge; retry later"),
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
