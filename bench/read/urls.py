"""The product's URLs plus ``/bench/bare``: the cheapest JSON a Django view can answer."""

from django.http import HttpRequest, HttpResponse
from django.urls import include, path


def bare(request: HttpRequest) -> HttpResponse:
    return HttpResponse(b'{"rank":1,"playerId":42,"points":1518}', content_type="application/json")


urlpatterns = [
    path("bench/bare", bare),
    path("", include("leaderboard_project.urls")),
]
