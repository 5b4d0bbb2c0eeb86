from django.urls import path

from . import apis

urlpatterns = [
    path("match-results", apis.MatchResultsSubmitApi.as_view(), name="match-results-submit"),
    path(
        "players/<str:player>/profile",
        apis.PlayerProfilePutApi.as_view(),
        name="player-profile-put",
    ),
    path(
        "seasons/<str:season>/boards/<str:board>/players/<str:player>/join",
        apis.BoardPlayerJoinApi.as_view(),
        name="board-player-join",
    ),
]
