"""Read API routes, included under ``api/``. Path parameters are matched as strings and
validated by the views, so a malformed one is a JSON 400 rather than an HTML 404.

Every board read is served twice: under ``seasons/<season>/boards/<board>/`` (contract 0.2)
and, for the ``main`` board, under ``seasons/<season>/leaderboard/`` (contract 0.1). The two
share their views; each path gets its own OpenAPI operation id.
"""

from django.urls import URLPattern, path
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework.views import APIView

from . import apis, openapi

app_name = "leaderboard"

_MAIN = "seasons/<str:season>/leaderboard"
_BOARD = "seasons/<str:season>/boards/<str:board>"

# (sub-path, view, route name)
_READS: list[tuple[str, type[APIView], str]] = [
    ("top", apis.BoardTopApi, "top"),
    ("players/<str:player>", apis.BoardPlayerApi, "player"),
    ("players/<str:player>/around", apis.BoardAroundApi, "around"),
    ("ranks", apis.BoardRanksApi, "ranks"),
    ("friends", apis.BoardFriendsApi, "friends"),
    ("players/<str:player>/cohort", apis.BoardPlayerCohortApi, "player-cohort"),
    ("cohorts/<str:cohort>/top", apis.BoardCohortTopApi, "cohort-top"),
    ("daily/<str:day>/top", apis.DailyTopApi, "daily-top"),
    ("weekly/<str:week>/top", apis.WeeklyTopApi, "weekly-top"),
]


def _routes(prefix: str, operation_prefix: str, name_prefix: str) -> list[URLPattern]:
    routes = []
    # The board family's {board} path parameter, with the slug pattern the views accept.
    parameters = [openapi.BOARD] if "<str:board>" in prefix else []
    for sub_path, view, name in _READS:
        operation = f"{operation_prefix}_{name.replace('-', '_')}"
        # A subclass per path family: the schema names each operation once.
        schema = extend_schema(operation_id=operation, parameters=parameters)
        named: type[APIView] = extend_schema_view(get=schema)(
            type(f"{view.__name__}_{operation_prefix}", (view,), {})
        )
        routes.append(path(f"{prefix}/{sub_path}", named.as_view(), name=f"{name_prefix}{name}"))
    return routes


urlpatterns = [
    path("seasons", apis.SeasonListApi.as_view(), name="season-list"),
    path("players/<str:player>", apis.PlayerCardApi.as_view(), name="player-card"),
    path("seasons/<str:season>/boards", apis.BoardListApi.as_view(), name="board-list"),
    *_routes(_MAIN, "leaderboard", ""),
    *_routes(_BOARD, "board", "board-"),
]
