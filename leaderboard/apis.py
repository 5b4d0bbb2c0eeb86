"""The public read API: one view per operation, over leaderboard.selectors.

Every board read lives at ``/api/seasons/{season}/boards/{board}/...``; the same views serve
``/api/seasons/{season}/leaderboard/...`` for the season's ``main`` board (contract 0.1 paths).

Every error is JSON: ``{"detail": "..."}``, plus ``"errors": {field: [messages]}`` for a
malformed parameter (400). An unknown season or board is 404. A read that needs PostgreSQL
while it cannot be reached is 503 with ``Retry-After``; the board reads need it only to resolve
their season and board, which the process memo keeps serving through an outage. A read that
needs Redis while it does not answer, or a board Redis lost, is 503 with ``Retry-After`` too
(``leaderboard.unavailable``: ``{"detail", "code"}``).
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from cachetools import LRUCache
from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.permissions import AllowAny
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView, exception_handler

from seasons.models import SCHEDULE_SLUG_PATTERN, SeasonStatus
from seasons.selectors import UnknownSchedule, season_get_cached

from . import openapi
from .models import BOARD_SLUG_PATTERN, MAIN_BOARD
from .selectors.boards import (
    BoardRef,
    board_get_cached,
    board_list_cached,
    season_list_with_main_rule,
)
from .selectors.cards import player_card_get
from .selectors.cohorts import cohort_standing_get, player_cohort_get
from .selectors.leagues import league_waiting_for
from .selectors.rankings import (
    RankingEntry,
    board_around_get,
    board_friends_get,
    board_player_get,
    board_ranks_get,
    daily_board_top_get,
    weekly_board_top_get,
)
from .selectors.sizes import board_sizes_known_get
from .selectors.top import TopList, board_top_get
from .selectors.tournaments import board_participants_get
from .serializers import (
    AroundQuerySerializer,
    CohortPathSerializer,
    CohortSerializer,
    CohortTopQuerySerializer,
    DayPathSerializer,
    ErrorSerializer,
    FriendsQuerySerializer,
    PlayerCardSerializer,
    PlayerIdPathSerializer,
    PlayerPathSerializer,
    PlayerStandingSerializer,
    RankingEntrySerializer,
    RanksQuerySerializer,
    SeasonPathSerializer,
    StrictIntegerField,
    TopQuerySerializer,
    WeekPathSerializer,
)
from .services import weekly_board_ensure
from .throttling import AnonFixedWindowThrottle
from .unavailable import unavailable_of

logger = logging.getLogger(__name__)

SOURCE_HEADER = "X-Leaderboard-Source"

# GET /api/seasons pages: at most this many seasons a page, and pages start before this offset.
SEASONS_PAGE_MAX = 1000
SEASONS_OFFSET_MAX = 1_000_000


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, with validation errors reshaped to {"detail", "errors"}; PostgreSQL or
    Redis down or unreachable, or a board Redis does not hold as truth, a 503 with Retry-After
    instead of a 500 or a wrong board (``leaderboard.unavailable``)."""
    unavailable = unavailable_of(exc)
    if unavailable is not None:
        logger.warning("%s: %s", unavailable.code, exc)
        return Response(unavailable.body(), status=503, headers=unavailable.headers())
    response = exception_handler(exc, context)
    if response is not None and isinstance(exc, ValidationError):
        errors = response.data if isinstance(response.data, dict) else {"": response.data}
        messages = {
            field: [str(message) for message in (value if isinstance(value, list) else [value])]
            for field, value in errors.items()
        }
        response.data = {
            "detail": "; ".join(
                f"{field}: {message}" for field, values in messages.items() for message in values
            ),
            "errors": messages,
        }
    return response


class JsonOnlyNegotiation(BaseContentNegotiation):
    """The read API speaks JSON only: skip parsing Accept headers on every request."""

    _renderer = JSONRenderer()

    def select_parser(self, request: Request, parsers: Any) -> Any:
        return parsers[0] if parsers else None

    def select_renderer(
        self, request: Request, renderers: Any, format_suffix: str | None = None
    ) -> tuple[JSONRenderer, str]:
        return self._renderer, self._renderer.media_type


class PublicApi(APIView):
    """Anonymous, throttled, JSON only, JSON errors."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    throttle_classes = [AnonFixedWindowThrottle]
    content_negotiation_class = JsonOnlyNegotiation
    renderer_classes = [JSONRenderer]

    def get_exception_handler(self):  # type: ignore[no-untyped-def]
        return api_exception_handler


_prototypes: dict[type[serializers.Serializer], serializers.Serializer] = {}


def parse(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    """Validate ``data`` with ``serializer_class``; ValidationError (400) when malformed.

    Validation runs through one prototype instance per class: ``run_validation`` keeps no
    state on the instance, and a new serializer per request would deep-copy its fields each
    time, which cost as much as the Redis read on the hot endpoints.
    """
    return dict(_prototype(serializer_class).run_validation(data))


def _prototype(serializer_class: type[serializers.Serializer]) -> serializers.Serializer:
    prototype = _prototypes.get(serializer_class)
    if prototype is None:
        prototype = _prototypes[serializer_class] = serializer_class()
    return prototype


_json = JSONRenderer()
_drf_encoder = _json.encoder_class()


def _json_bytes(data: Any) -> bytes:
    """``data`` as JSON, as DRF's renderer writes it: through orjson, several times faster on
    a page of entries than the standard library's encoder, with DRF's encoder for what
    orjson would write differently (datetimes: DRF keeps milliseconds and writes ``Z``) or not
    at all. An integer past 64 bits (in a result's metadata) makes orjson refuse: DRF renders
    those answers whole."""
    try:
        body = orjson.dumps(
            data,
            default=_drf_encoder.default,
            option=orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_NON_STR_KEYS,
        )
    except orjson.JSONEncodeError:
        return _json.render(data)
    # DRF escapes the two line separators JavaScript will not take raw in a string.
    if b"\xe2\x80\xa8" in body or b"\xe2\x80\xa9" in body:
        body = body.replace(b"\xe2\x80\xa8", b"\\u2028").replace(b"\xe2\x80\xa9", b"\\u2029")
    return body


def json_response(
    serializer_class: type[serializers.Serializer], instance: Any, *, many: bool = False
) -> HttpResponse:
    """``instance`` through ``serializer_class``, rendered as JSON.

    A DRF ``Response`` is a template response rendered after the view returns, and a serializer
    instance deep-copies its fields: on the hot endpoints the two cost as much as the Redis read,
    so the output goes through one prototype per class and is rendered here.
    """
    return HttpResponse(
        _json_body(serializer_class, instance, many=many), content_type="application/json"
    )


def _json_body(
    serializer_class: type[serializers.Serializer], instance: Any, *, many: bool = False
) -> bytes:
    prototype = _prototype(serializer_class)
    if many:
        data: Any = [prototype.to_representation(item) for item in instance]
    else:
        data = prototype.to_representation(instance)
    return _json_bytes(data)


_SLUG = re.compile(BOARD_SLUG_PATTERN)


def board_or_404(season_id: int, slug: str) -> BoardRef:
    """The season's board, or a 404 that says which of the two does not exist."""
    board = board_get_cached(season_id=season_id, slug=slug) if _SLUG.match(slug) else None
    if board is not None:
        return board
    if season_get_cached(season_id=season_id) is None:
        raise NotFound(f"season {season_id} does not exist")
    raise NotFound(f"season {season_id} has no board {slug[:40]!r}")


# --- cacheable lists (top, daily, weekly) ---------------------------------------------------------

# Rendered bodies of snapshot-served top lists: a snapshot changes once a second, so each
# process renders each (snapshot, limit) once instead of once per request.
_rendered: LRUCache[tuple[int, int, int], tuple[bytes, str]] = LRUCache(maxsize=512)
_rendered_lock = threading.Lock()

# The version of a top list (leaderboard.selectors.top.TopList.version), on 200s and 304s.
VERSION_HEADER = "X-Snapshot-Version"
# Digits of a version in an ETag: microseconds since 1970 have 16 until the year 2286.
_VERSION_DIGITS = 16


def _render(entries: Sequence[RankingEntry]) -> tuple[bytes, str]:
    """The JSON body and its digest (the part of an ETag that says what the body holds)."""
    body = _json_body(RankingEntrySerializer, entries, many=True)
    return body, hashlib.blake2b(body, digest_size=12).hexdigest()


def _rendered_get(
    entries: Sequence[RankingEntry], memo_key: tuple[int, int, int] | None
) -> tuple[bytes, str]:
    rendered = None
    if memo_key is not None:
        # cachetools' LRU updates its order on every read: not thread-safe without the lock.
        with _rendered_lock:
            rendered = _rendered.get(memo_key)
    if rendered is None:
        rendered = _render(entries)
        if memo_key is not None:
            with _rendered_lock:
                _rendered[memo_key] = rendered
    return rendered


def _etag(digest: str, version: int | None) -> str:
    """A list's ETag: its body's digest, after its version for a top list
    (``"<version>-<digest>"``), so the If-None-Match a client sends says what it has seen."""
    return f'"{digest}"' if version is None else f'"{version}-{digest}"'


@dataclass(frozen=True, slots=True)
class IfNoneMatch:
    """What a request's If-None-Match says: the digests of the bodies the client holds (or
    ``*``), and the newest top-list version among its tags (0: none)."""

    digests: frozenset[str]
    any: bool
    version: int

    @classmethod
    def parse(cls, request: Request) -> IfNoneMatch:
        digests: set[str] = set()
        newest = 0
        for raw in request.headers.get("If-None-Match", "").split(","):
            tag = raw.strip().removeprefix("W/").strip('"')
            if not tag:
                continue
            version, _, digest = tag.rpartition("-")
            digests.add(digest)
            # isascii: '²' is a digit to isdigit() and not to int() (a 500 from one byte).
            if version.isascii() and version.isdigit() and len(version) <= _VERSION_DIGITS:
                newest = max(newest, int(version))
        return cls(digests=frozenset(digests), any="*" in digests, version=newest)

    def matches(self, digest: str) -> bool:
        # By digest, whatever the version: a refresh that changed nothing in the list is the
        # body the client holds, and answers 304 (with the new version in its headers).
        return self.any or digest in self.digests


def cacheable_list_response(
    request: Request,
    *,
    entries: Sequence[RankingEntry],
    memo_key: tuple[int, int, int] | None = None,
    version: int | None = None,
    headers: dict[str, str] | None = None,
) -> HttpResponse:
    """A JSON list with an ETag and ``Cache-Control: max-age=1``; 304 on a matching
    If-None-Match. With a ``version`` (the top lists), the ETag carries it, and so does the
    X-Snapshot-Version header."""
    body, digest = _rendered_get(entries, memo_key)
    if IfNoneMatch.parse(request).matches(digest):
        response = HttpResponse(status=304)
    else:
        response = HttpResponse(body, content_type="application/json")
    response["ETag"] = _etag(digest, version)
    response["Cache-Control"] = "max-age=1"
    if version is not None:
        response[VERSION_HEADER] = str(version)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def top_list_etag(*, board: BoardRef, top: TopList, limit: int) -> str:
    """The ETag the top endpoint gives ``top`` at ``limit`` (the live page starts polling with
    it, so an unchanged list is a 304 from the first poll)."""
    body_digest = _rendered_get(top.entries, _top_memo_key(board, top, limit))[1]
    return _etag(body_digest, top.version)


def _top_memo_key(board: BoardRef, top: TopList, limit: int) -> tuple[int, int, int] | None:
    # A live list is read per request: nothing to share.
    return (board.id, top.version, limit) if top.source == "snapshot" else None


_LIST = RankingEntrySerializer(many=True)
# The lists served with an ETag (top, daily, weekly): If-None-Match, ETag, Retry-After.
_CACHEABLE_PARAMS = [openapi.IF_NONE_MATCH, openapi.ETAG, openapi.RETRY_AFTER]
_TOP_PARAMS = [openapi.TOP_IF_NONE_MATCH, openapi.TOP_ETAG, openapi.VERSION, openapi.RETRY_AFTER]


class BoardTopApi(PublicApi):
    @extend_schema(
        summary="The board's top entries",
        description=(
            "Served from a snapshot refreshed every second (header X-Leaderboard-Source: "
            "snapshot), or read from the live board when the snapshot is missing or stale "
            "(live). X-Snapshot-Version says when the board was as listed (microseconds of the "
            "boards' Redis clock, either source): a larger version is a later list. Carries an "
            "ETag made of the version and a digest of the body; If-None-Match answers 304 when "
            "the body is the one its tag names, and never with an older version than its "
            "newest tag's."
        ),
        parameters=[openapi.SEASON, TopQuerySerializer, *_TOP_PARAMS],
        responses={200: _LIST, 304: openapi.NOT_MODIFIED, **openapi.BOARD_ERRORS},
    )
    def get(self, request: Request, season: str, board: str = MAIN_BOARD) -> HttpResponse:
        path = parse(SeasonPathSerializer, {"season": season})
        query = parse(TopQuerySerializer, request.query_params)
        ref = board_or_404(path["season"], board)
        seen = IfNoneMatch.parse(request).version
        top = board_top_get(board=ref, limit=query["limit"], at_least=seen)
        return cacheable_list_response(
            request,
            entries=top.entries,
            memo_key=_top_memo_key(ref, top, query["limit"]),
            version=top.version,
            headers={SOURCE_HEADER: top.source},
        )


class BoardPlayerApi(PublicApi):
    @extend_schema(
        summary="A player's entry, with the board size, percentile and points to the next rank",
        parameters=[openapi.SEASON, openapi.PLAYER, openapi.RETRY_AFTER],
        responses={
            200: PlayerStandingSerializer,
            **openapi.BOARD_ERRORS,
            404: OpenApiResponse(
                ErrorSerializer, description="Unknown season or board, or no score."
            ),
        },
    )
    def get(
        self, request: Request, season: str, player: str, board: str = MAIN_BOARD
    ) -> HttpResponse:
        path = parse(PlayerPathSerializer, {"season": season, "player": player})
        ref = board_or_404(path["season"], board)
        standing = board_player_get(board=ref, player_id=path["player"])
        if standing is None:
            where = f"season {path['season']}"
            if ref.slug != MAIN_BOARD:
                where = f"board {ref.slug!r} of {where}"
            raise NotFound(f"player {path['player']} has no score in {where}")
        return json_response(PlayerStandingSerializer, standing)


class BoardAroundApi(PublicApi):
    @extend_schema(
        summary="The entries from the player's rank - radius to + radius ([] without a score)",
        parameters=[openapi.SEASON, openapi.PLAYER, AroundQuerySerializer, openapi.RETRY_AFTER],
        responses={200: _LIST, **openapi.BOARD_ERRORS},
    )
    def get(
        self, request: Request, season: str, player: str, board: str = MAIN_BOARD
    ) -> HttpResponse:
        path = parse(PlayerPathSerializer, {"season": season, "player": player})
        query = parse(AroundQuerySerializer, request.query_params)
        entries = board_around_get(
            board=board_or_404(path["season"], board),
            player_id=path["player"],
            radius=query["radius"],
        )
        return json_response(RankingEntrySerializer, entries, many=True)


class BoardRanksApi(PublicApi):
    @extend_schema(
        summary="A page of entries from a 1-based position",
        parameters=[openapi.SEASON, RanksQuerySerializer, openapi.RETRY_AFTER],
        responses={200: _LIST, **openapi.BOARD_ERRORS},
    )
    def get(self, request: Request, season: str, board: str = MAIN_BOARD) -> HttpResponse:
        path = parse(SeasonPathSerializer, {"season": season})
        query = parse(RanksQuerySerializer, request.query_params)
        entries = board_ranks_get(
            board=board_or_404(path["season"], board),
            start_rank=query["start"],
            count=query["count"],
        )
        return json_response(RankingEntrySerializer, entries, many=True)


class BoardFriendsApi(PublicApi):
    @extend_schema(
        summary="Those players' entries with their global ranks, best first",
        description="Players without a score are left out. At most 200 ids.",
        parameters=[openapi.SEASON, openapi.FRIEND_IDS, openapi.RETRY_AFTER],
        responses={200: _LIST, **openapi.BOARD_ERRORS},
    )
    def get(self, request: Request, season: str, board: str = MAIN_BOARD) -> HttpResponse:
        path = parse(SeasonPathSerializer, {"season": season})
        query = parse(FriendsQuerySerializer, request.query_params)
        entries = board_friends_get(
            board=board_or_404(path["season"], board), player_ids=query["ids"]
        )
        return json_response(RankingEntrySerializer, entries, many=True)


def _cohort_board(season_id: int, slug: str) -> BoardRef:
    ref = board_or_404(season_id, slug)
    if ref.cohort_size is None:
        raise NotFound(f"board {ref.slug!r} of season {season_id} has no cohorts")
    return ref


_NO_COHORT = OpenApiResponse(
    ErrorSerializer,
    description="Unknown season or board, a board without cohorts, or no such cohort.",
)


class BoardPlayerCohortApi(PublicApi):
    @extend_schema(
        summary="The player's cohort, ranked: each entry's rank within it and global rank",
        description=(
            "Boards created with --cohort-size only. A player joins a cohort at their first "
            "counted result and never changes it; the cohort is ranked by the board's own rule, "
            "order and tie-break columns."
        ),
        parameters=[openapi.SEASON, openapi.PLAYER, openapi.RETRY_AFTER],
        responses={200: CohortSerializer, **openapi.BOARD_ERRORS, 404: _NO_COHORT},
    )
    def get(
        self, request: Request, season: str, player: str, board: str = MAIN_BOARD
    ) -> HttpResponse:
        path = parse(PlayerPathSerializer, {"season": season, "player": player})
        ref = _cohort_board(path["season"], board)
        standing = player_cohort_get(board=ref, player_id=path["player"])
        if standing is None:
            waiting = league_waiting_for(board=ref)
            if waiting is not None:
                raise NotFound(
                    f"player {path['player']} is in no cohort of board {ref.slug!r} yet: its "
                    f"league's cohorts form once season {waiting} (the previous season of the "
                    "league) is closed, which decides each player's tier"
                )
            raise NotFound(f"player {path['player']} is in no cohort of board {ref.slug!r}")
        return json_response(CohortSerializer, standing)


class BoardCohortTopApi(PublicApi):
    @extend_schema(
        summary="One cohort's top entries: rank within the cohort and global rank",
        parameters=[
            openapi.SEASON,
            openapi.COHORT,
            CohortTopQuerySerializer,
            openapi.RETRY_AFTER,
        ],
        responses={200: CohortSerializer, **openapi.BOARD_ERRORS, 404: _NO_COHORT},
    )
    def get(
        self, request: Request, season: str, cohort: str, board: str = MAIN_BOARD
    ) -> HttpResponse:
        path = parse(CohortPathSerializer, {"season": season, "cohort": cohort})
        query = parse(CohortTopQuerySerializer, request.query_params)
        ref = _cohort_board(path["season"], board)
        standing = cohort_standing_get(board=ref, number=path["cohort"], limit=query["limit"])
        if standing is None:
            raise NotFound(f"board {ref.slug!r} has no cohort {path['cohort']}")
        return json_response(CohortSerializer, standing)


class DailyTopApi(PublicApi):
    @extend_schema(
        summary="The top entries of one UTC day's board",
        parameters=[openapi.SEASON, openapi.DAY, TopQuerySerializer, *_CACHEABLE_PARAMS],
        responses={200: _LIST, 304: openapi.NOT_MODIFIED, **openapi.BOARD_ERRORS},
    )
    def get(self, request: Request, season: str, day: str, board: str = MAIN_BOARD) -> HttpResponse:
        path = parse(DayPathSerializer, {"season": season, "day": day})
        query = parse(TopQuerySerializer, request.query_params)
        entries = daily_board_top_get(
            board=board_or_404(path["season"], board), day=path["day"], limit=query["limit"]
        )
        return cacheable_list_response(request, entries=entries)


class WeeklyTopApi(PublicApi):
    @extend_schema(
        summary="The top entries of one ISO week's board",
        description=(
            "Weekly boards are built from the daily boards by a periodic task; a missing board "
            "of a week that has started is built on the first request."
        ),
        parameters=[openapi.SEASON, openapi.WEEK, TopQuerySerializer, *_CACHEABLE_PARAMS],
        responses={200: _LIST, 304: openapi.NOT_MODIFIED, **openapi.BOARD_ERRORS},
    )
    def get(
        self, request: Request, season: str, week: str, board: str = MAIN_BOARD
    ) -> HttpResponse:
        path = parse(WeekPathSerializer, {"season": season, "week": week})
        query = parse(TopQuerySerializer, request.query_params)
        ref = board_or_404(path["season"], board)
        iso_year, iso_week = path["week"]
        built = weekly_board_ensure(
            board=ref, iso_year=iso_year, iso_week=iso_week, today=timezone.now().date()
        )
        entries = weekly_board_top_get(
            board=ref, iso_year=iso_year, iso_week=iso_week, limit=query["limit"], primary=built
        )
        return cacheable_list_response(request, entries=entries)


class SeasonListApi(PublicApi):
    """GET /api/seasons?status=&schedule=&limit=&offset=: the seasons, the most recent start
    first. Without ``limit``, every one (the contract's list): a schedule adds a season each
    occurrence, so clients that list often filter or page."""

    class SeasonsQuerySerializer(serializers.Serializer):
        status = serializers.ChoiceField(choices=SeasonStatus.values, required=False)
        schedule = serializers.RegexField(SCHEDULE_SLUG_PATTERN, required=False)
        limit = StrictIntegerField(min_value=1, max_value=SEASONS_PAGE_MAX, required=False)
        offset = StrictIntegerField(min_value=0, max_value=SEASONS_OFFSET_MAX, default=0)

    class SeasonOutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        name = serializers.CharField()
        status = serializers.CharField()
        startsAt = serializers.DateTimeField(source="starts_at")
        endsAt = serializers.DateTimeField(source="ends_at")
        rule = serializers.CharField()
        schedule = serializers.CharField(
            source="schedule.slug",
            allow_null=True,
            help_text="The slug of the schedule that started it (GET /api/schedules); null for "
            "a season created by hand.",
        )
        occurrence = serializers.IntegerField(
            allow_null=True, help_text="Its schedule's occurrence number; null without one."
        )

    @extend_schema(
        operation_id="seasons_list",
        summary="The seasons, the most recent start first (rule: its main board's)",
        parameters=[
            OpenApiParameter(
                "status",
                {"type": "string", "enum": SeasonStatus.values},
                OpenApiParameter.QUERY,
                description="Only the seasons in this status.",
            ),
            openapi.SCHEDULE_FILTER,
            *openapi.paging(
                what="Seasons",
                limit_max=SEASONS_PAGE_MAX,
                offset_max=SEASONS_OFFSET_MAX,
                default=None,
            ),
            openapi.RETRY_AFTER,
        ],
        responses={
            200: SeasonOutputSerializer(many=True),
            400: openapi.BAD_PARAMETER,
            404: OpenApiResponse(ErrorSerializer, description="Unknown schedule."),
            **openapi.PUBLIC_ERRORS,
        },
    )
    def get(self, request: Request) -> Response:
        query = parse(self.SeasonsQuerySerializer, request.query_params)
        try:
            seasons = season_list_with_main_rule(
                status=query.get("status"), schedule_slug=query.get("schedule")
            )
        except UnknownSchedule as exc:
            raise NotFound(str(exc)) from exc
        offset = query["offset"]
        limit = query.get("limit")
        page = seasons[offset:] if limit is None else seasons[offset : offset + limit]
        return Response(self.SeasonOutputSerializer(page, many=True).data)


class TiebreakColumnSerializer(serializers.Serializer):
    name = serializers.CharField()
    order = serializers.ChoiceField(choices=["asc", "desc"])


class BoardListApi(PublicApi):
    """GET /api/seasons/{season}/boards: the season's boards, main first."""

    class BoardOutputSerializer(serializers.Serializer):
        slug = serializers.CharField()
        name = serializers.CharField()
        order = serializers.CharField()
        rule = serializers.CharField()
        size = serializers.IntegerField(
            allow_null=True,
            help_text="Players on the board now; null while the board is being recovered "
            "(recovering: true), never a count Redis cannot vouch for.",
        )
        recovering = serializers.BooleanField(
            help_text="Redis lost the board and it is being rebuilt from PostgreSQL: its reads "
            "answer 503 with Retry-After meanwhile, and size is null."
        )
        keepsMetadata = serializers.BooleanField(
            source="keeps_metadata",
            help_text="Created with --metadata: its entries carry the deciding result's metadata.",
        )
        tiebreakers = TiebreakColumnSerializer(
            many=True,
            help_text="The columns ranked after points, in order (empty: points only); results "
            "for the board carry tiebreakers with exactly these, and its entries carry them.",
        )
        cohortSize = serializers.IntegerField(
            source="cohort_size",
            allow_null=True,
            help_text="Created with --cohort-size: players are ranked in cohorts of this many "
            "too (.../players/{player}/cohort, .../cohorts/{cohort}/top); null: no cohorts.",
        )
        tiers = serializers.ListField(
            child=serializers.CharField(),
            allow_null=True,
            help_text="A league board (a schedule's board with cohorts, docs/leagues.md): its "
            "tiers, lowest first; each cohort holds one, and entries carry the player's. Null "
            "elsewhere.",
        )
        promotePercent = serializers.IntegerField(
            source="promote_percent",
            allow_null=True,
            help_text="League boards: the percent of each cohort moving up one tier at the "
            "close-out; null elsewhere.",
        )
        relegatePercent = serializers.IntegerField(
            source="relegate_percent",
            allow_null=True,
            help_text="League boards: the percent of each cohort moving down one tier; null "
            "elsewhere.",
        )
        joinRequired = serializers.BooleanField(
            source="join_required",
            help_text="A tournament (--join-required): only the results of players who joined "
            "(POST .../players/{player}/join) count.",
        )
        joined = serializers.IntegerField(
            allow_null=True,
            help_text="Players who joined (seats taken); null on a board that does not require "
            "joining.",
        )
        maxSize = serializers.IntegerField(
            source="max_size",
            allow_null=True,
            help_text="Its seats (--max-size); null: unlimited.",
        )
        maxAttempts = serializers.IntegerField(
            source="max_attempts",
            allow_null=True,
            help_text="Distinct matches counted per player at most (--max-attempts); its entries "
            "carry attempts. Null: unlimited.",
        )
        rankEvents = serializers.BooleanField(
            source="rank_events",
            help_text="The board emits rank events (docs/events.md) to the rank-events topic "
            "and the live page's stream; false: created with --no-events or turned off.",
        )
        eventTopN = serializers.IntegerField(
            source="event_top_n",
            allow_null=True,
            min_value=1,
            help_text="The top of its entered_top and left_top events (--event-top-n, default "
            "100); null when the board emits no events.",
        )

    @extend_schema(
        operation_id="boards_list",
        summary="The season's boards, main first, with their number of players",
        parameters=[openapi.SEASON, openapi.RETRY_AFTER],
        responses={200: BoardOutputSerializer(many=True), **openapi.BOARD_ERRORS},
    )
    def get(self, request: Request, season: str) -> Response:
        path = parse(SeasonPathSerializer, {"season": season})
        if season_get_cached(season_id=path["season"]) is None:
            raise NotFound(f"season {path['season']} does not exist")
        boards = board_list_cached(season_id=path["season"])
        sizes = board_sizes_known_get(boards=boards)
        joined = board_participants_get(boards=boards)
        rows = [
            {
                "slug": b.slug,
                "name": b.name,
                "order": b.order,
                "rule": b.rule,
                "size": sizes[b.id],
                "recovering": sizes[b.id] is None,
                "keeps_metadata": b.keeps_metadata,
                "tiebreakers": [{"name": c.name, "order": c.order} for c in b.tiebreaks],
                "cohort_size": b.cohort_size,
                "tiers": list(b.tiers) if b.tiers else None,
                "promote_percent": b.promote_percent if b.tiers else None,
                "relegate_percent": b.relegate_percent if b.tiers else None,
                "join_required": b.join_required,
                "joined": joined.get(b.id),
                "max_size": b.max_size,
                "max_attempts": b.max_attempts,
                "rank_events": b.rank_events,
                "event_top_n": b.event_top_n if b.rank_events else None,
            }
            for b in boards
        ]
        return Response(self.BoardOutputSerializer(rows, many=True).data)


class PlayerCardApi(PublicApi):
    @extend_schema(
        operation_id="player_card",
        summary="A player's card: profile, and rank on every board of every active season",
        description=(
            "displayName and country come from the player's profile (contract 0.3); "
            "displayName is null when staff hid it. boards lists every board of every active "
            "season on which the player has a score; a league board's row carries the "
            "player's tier, and a row of any board with cohorts their cohort number (both null "
            "while they are in no cohort yet)."
        ),
        parameters=[openapi.PLAYER, openapi.RETRY_AFTER],
        responses={
            200: PlayerCardSerializer,
            400: openapi.BAD_PARAMETER,
            404: OpenApiResponse(
                ErrorSerializer, description="The player has neither a profile nor a score."
            ),
            **openapi.PUBLIC_ERRORS,
        },
    )
    def get(self, request: Request, player: str) -> HttpResponse:
        path = parse(PlayerIdPathSerializer, {"player": player})
        card = player_card_get(player_id=path["player"])
        if card is None:
            raise NotFound(f"player {path['player']} has neither a profile nor a score")
        return json_response(PlayerCardSerializer, card)
