"""What the OpenAPI schema says of the public API's parameters and answers: the bounds and
formats the views enforce, and every status a view can answer.

Each bound below is the one the view's serializer (leaderboard/serializers.py) checks, taken from
the same constant, so the schema cannot drift from the code; ``tests/leaderboard_project/
test_schemathesis.py`` holds the API to it (no schema-valid request refused, no status the
schema does not list).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse

from seasons.models import SCHEDULE_SLUG_PATTERN

from .models import BOARD_SLUG_PATTERN
from .serializers import MAX_FRIENDS, MAX_ID, ErrorSerializer

# A positive id that fits PostgreSQL's bigint, digits only (IdField).
ID_SCHEMA: dict[str, Any] = {"type": "integer", "format": "int64", "minimum": 1, "maximum": MAX_ID}
# An id in a comma-separated list: up to 18 digits is always inside bigint (the 19-digit ones
# above 2^63 - 1 are refused), so the pattern promises only what is accepted.
_LISTED_ID = "[1-9][0-9]{0,17}"
# ISO weeks 01-52 exist in every year; week 53 only in long years, and 9999-W52 ends in year
# 10000 (refused): the pattern states the weeks valid whatever the year, years 0001-9998.
_ISO_YEAR = (
    "(000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9]|999[0-8])"
)
_ISO_WEEK = "(0[1-9]|[1-4][0-9]|5[0-2])"


def path_id(name: str, description: str) -> OpenApiParameter:
    return OpenApiParameter(name, ID_SCHEMA, OpenApiParameter.PATH, description=description)


SCHEDULE_FILTER = OpenApiParameter(
    "schedule",
    {"type": "string", "pattern": SCHEDULE_SLUG_PATTERN},
    OpenApiParameter.QUERY,
    description="Only the seasons of this schedule (an unknown one is 404).",
)


def paging(
    *, what: str, limit_max: int, offset_max: int, default: int | None
) -> list[OpenApiParameter]:
    """A list's ``limit`` and ``offset`` (newest first); ``default`` None: every one."""
    listed = f"default {default}" if default else "default: every one"
    return [
        OpenApiParameter(
            "limit",
            {"type": "integer", "minimum": 1, "maximum": limit_max},
            OpenApiParameter.QUERY,
            description=f"{what} to list ({listed}).",
        ),
        OpenApiParameter(
            "offset",
            {"type": "integer", "minimum": 0, "maximum": offset_max},
            OpenApiParameter.QUERY,
            description=f"{what} to skip, newest first (default 0): the next page.",
        ),
    ]


SEASON = path_id("season", "The season's id.")
PLAYER = path_id("player", "The player's id.")
COHORT = path_id("cohort", "The cohort's number on the board (from 1).")
BOARD = OpenApiParameter(
    "board",
    {"type": "string", "pattern": BOARD_SLUG_PATTERN},
    OpenApiParameter.PATH,
    description="The board's slug (an unknown one is 404).",
)
DAY = OpenApiParameter(
    "day",
    {"type": "string", "format": "date", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
    OpenApiParameter.PATH,
    description="A UTC day, YYYY-MM-DD.",
)
WEEK = OpenApiParameter(
    "week",
    {"type": "string", "pattern": f"^{_ISO_YEAR}-W{_ISO_WEEK}$"},
    OpenApiParameter.PATH,
    description="An ISO week, YYYY-Www (e.g. 2026-W41). Week 53 of a long ISO year is "
    "served too; a week that does not exist that year is 400.",
)
FRIEND_IDS = OpenApiParameter(
    "ids",
    {
        "type": "string",
        "pattern": f"^{_LISTED_ID}(,{_LISTED_ID}){{0,{MAX_FRIENDS - 1}}}$",
    },
    OpenApiParameter.QUERY,
    required=True,
    description=f"Comma-separated player ids, at most {MAX_FRIENDS} distinct (a repeated id "
    "counts once).",
)
RETRY_AFTER = OpenApiParameter(
    "Retry-After",
    OpenApiTypes.INT,
    OpenApiParameter.HEADER,
    response=[429, 503],
    description="Seconds to wait before trying again.",
)
ETAG = OpenApiParameter(
    "ETag",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    response=[200, 304],
    description="Computed from the body: equal entries, equal ETag.",
)
IF_NONE_MATCH = OpenApiParameter(
    "If-None-Match",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    description="An ETag of an earlier answer: 304 without a body when it still matches.",
)
# The top lists: versioned (leaderboard.selectors.top.TopList.version).
TOP_ETAG = OpenApiParameter(
    "ETag",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    response=[200, 304],
    description='"<version>-<digest>": the list\'s version (as in X-Snapshot-Version) and a '
    "digest of the body (equal entries, equal digest).",
)
TOP_IF_NONE_MATCH = OpenApiParameter(
    "If-None-Match",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    description="ETags of earlier answers: 304 without a body when the list's body is the one "
    "a tag names (whatever its version). The answer is never older than the newest version "
    "among the tags: a client that sends its last ETag never sees the list go backwards.",
)
VERSION = OpenApiParameter(
    "X-Snapshot-Version",
    {"type": "integer", "format": "int64", "minimum": 0},
    OpenApiParameter.HEADER,
    response=[200, 304],
    description="When the board was as listed, in microseconds of the boards' Redis clock, "
    "whether the list came from the snapshot or the live board: a larger version is a later "
    "list, equal versions list equal entries. A client that keeps the largest version seen "
    "and ignores answers below it never shows an older list.",
)

BAD_PARAMETER = OpenApiResponse(ErrorSerializer, description="A malformed parameter.")
UNKNOWN = OpenApiResponse(ErrorSerializer, description="Unknown season or board.")
THROTTLED = OpenApiResponse(
    ErrorSerializer,
    description="Too many requests from this client (API_ANON_THROTTLE_RATE); Retry-After says "
    "when the window ends.",
)
UNAVAILABLE = OpenApiResponse(
    ErrorSerializer,
    description="PostgreSQL cannot be reached and the answer needs it (a season or board this "
    "process has not resolved yet, or the read needs PostgreSQL itself; code "
    "database_unavailable), Redis does not answer (down, restarting, loading, busy or failing "
    "over; code redis_unavailable), or Redis lost the board and it is being rebuilt from "
    "PostgreSQL (never an empty or partial board; code board_recovering), or a week's board "
    "is missing and another request is building it, or it cannot be built now (the weekly "
    "reads; code week_unavailable); Retry-After says when to try again.",
)
NOT_MODIFIED = OpenApiResponse(description="If-None-Match matched: the body has not changed.")

# Every public read: throttled, and 503 while PostgreSQL or Redis is unavailable.
PUBLIC_ERRORS: dict[int, OpenApiResponse] = {429: THROTTLED, 503: UNAVAILABLE}
# Reads of one season's board: also a malformed parameter and an unknown season or board.
BOARD_ERRORS: dict[int, OpenApiResponse] = {400: BAD_PARAMETER, 404: UNKNOWN, **PUBLIC_ERRORS}
