"""Test-only URLconf: the project's URLs and its handler500, plus views that raise."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import path
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from leaderboard_project.urls import handler404, handler500
from leaderboard_project.urls import urlpatterns as project_urlpatterns


class BoomError(RuntimeError):
    pass


def boom(request: HttpRequest) -> HttpResponse:
    raise BoomError("kaboom: postgres://leaderboard:s3cret@db/leaderboard")


class BoomAPIView(APIView):
    def get(self, request: Request) -> Response:
        raise BoomError("kaboom: postgres://leaderboard:s3cret@db/leaderboard")


urlpatterns = [
    path("api/boom", boom),
    path("api/drf-boom", BoomAPIView.as_view()),
    path("pages/boom", boom),
    *project_urlpatterns,
]

__all__ = ["handler404", "handler500", "urlpatterns"]
