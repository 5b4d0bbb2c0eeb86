"""Close-out API routes, included under ``api/``."""

from django.urls import path

from . import apis

urlpatterns = [
    path(
        "seasons/<int:season_id>/standings",
        apis.SeasonStandingsApi.as_view(),
        name="season-standings",
    ),
]
