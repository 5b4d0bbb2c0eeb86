"""Close-out and schedule API routes, included under ``api/``."""

from django.urls import path
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework.views import APIView

from leaderboard import openapi

from . import apis

# Each path its own subclass, so the schema names each operation once. The main board's
# standings answer at two paths: the close-out's first one, and the one every read of main
# has under /leaderboard/.
_MainStandings: type[APIView] = extend_schema_view(
    get=extend_schema(operation_id="season_standings")
)(type("MainSeasonStandingsApi", (apis.SeasonStandingsApi,), {}))
_LeaderboardStandings: type[APIView] = extend_schema_view(
    get=extend_schema(operation_id="leaderboard_standings")
)(type("LeaderboardSeasonStandingsApi", (apis.SeasonStandingsApi,), {}))
_BoardStandings: type[APIView] = extend_schema_view(
    get=extend_schema(operation_id="board_standings", parameters=[openapi.BOARD])
)(type("BoardSeasonStandingsApi", (apis.SeasonStandingsApi,), {}))

urlpatterns = [
    path("schedules", apis.ScheduleListApi.as_view(), name="schedule-list"),
    path("players/<str:player>/history", apis.PlayerHistoryApi.as_view(), name="player-history"),
    path(
        "schedules/<str:slug>/seasons",
        apis.ScheduleSeasonListApi.as_view(),
        name="schedule-seasons",
    ),
    # The season is matched as a string and parsed by the view: a malformed one is a JSON 400.
    path(
        "seasons/<str:season>/standings",
        _MainStandings.as_view(),
        name="season-standings",
    ),
    path(
        "seasons/<str:season>/leaderboard/standings",
        _LeaderboardStandings.as_view(),
        name="leaderboard-standings",
    ),
    path(
        "seasons/<str:season>/boards/<str:board>/standings",
        _BoardStandings.as_view(),
        name="board-standings",
    ),
]
