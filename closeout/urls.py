"""Close-out and schedule API routes, included under ``api/``."""

from django.urls import path
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework.views import APIView

from leaderboard import openapi

from . import apis

# Each path its own subclass, so the schema names each operation once.
_MainStandings: type[APIView] = extend_schema_view(
    get=extend_schema(operation_id="season_standings")
)(type("MainSeasonStandingsApi", (apis.SeasonStandingsApi,), {}))
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
    path(
        "seasons/<int:season_id>/standings",
        _MainStandings.as_view(),
        name="season-standings",
    ),
    path(
        "seasons/<int:season_id>/boards/<str:board>/standings",
        _BoardStandings.as_view(),
        name="board-standings",
    ),
]
