"""Public HTML pages (the JSON API is in leaderboard/urls.py)."""

from django.urls import path

from . import views

urlpatterns = [
    path("", views.seasons_page, name="seasons-page"),
    path("seasons/<int:season_id>", views.season_board_page, name="season-board-page"),
    path(
        "seasons/<int:season_id>/boards/<str:board>",
        views.season_board_page,
        name="board-page",
    ),
    path(
        "seasons/<int:season_id>/boards/<str:board>/cohorts/<int:cohort>",
        views.board_cohort_page,
        name="cohort-page",
    ),
]
