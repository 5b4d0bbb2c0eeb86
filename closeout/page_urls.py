"""Public HTML pages of schedules (the JSON API is in closeout/urls.py)."""

from django.urls import path

from . import views

urlpatterns = [
    path("schedules", views.schedules_page, name="schedules-page"),
    path("schedules/<str:slug>", views.schedule_page, name="schedule-page"),
    path("players/<int:player_id>/history", views.player_history_page, name="player-history-page"),
]
