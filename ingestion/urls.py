from django.urls import path

from . import apis

urlpatterns = [
    path("match-results", apis.MatchResultsSubmitApi.as_view(), name="match-results-submit"),
]
