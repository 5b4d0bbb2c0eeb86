"""Read API routes, included under ``api/``. Path parameters are matched as strings and
validated by the views, so a malformed one is a JSON 400 rather than an HTML 404."""

from django.urls import path

from . import apis

app_name = "leaderboard"

_BOARD = "seasons/<str:season>/leaderboard"

urlpatterns = [
    path("seasons", apis.SeasonListApi.as_view(), name="season-list"),
    path(f"{_BOARD}/top", apis.BoardTopApi.as_view(), name="top"),
    path(f"{_BOARD}/players/<str:player>", apis.BoardPlayerApi.as_view(), name="player"),
    path(f"{_BOARD}/players/<str:player>/around", apis.BoardAroundApi.as_view(), name="around"),
    path(f"{_BOARD}/ranks", apis.BoardRanksApi.as_view(), name="ranks"),
    path(f"{_BOARD}/friends", apis.BoardFriendsApi.as_view(), name="friends"),
    path(f"{_BOARD}/daily/<str:day>/top", apis.DailyTopApi.as_view(), name="daily-top"),
    path(f"{_BOARD}/weekly/<str:week>/top", apis.WeeklyTopApi.as_view(), name="weekly-top"),
]
