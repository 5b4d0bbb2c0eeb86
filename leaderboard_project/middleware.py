"""A PostgreSQL outage is a 503 with Retry-After everywhere, never a 500.

The read API's own handler (``leaderboard.apis.api_exception_handler``) answers its views; this
middleware answers every other view that meets PostgreSQL down or unreachable
(``seasons.memo.DATABASE_UNREACHABLE``): the HTML pages, the ingestion door's token lookup, the
admin. JSON under /api/ (the API's error shape), a short HTML page elsewhere.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

from leaderboard.apis import DATABASE_UNAVAILABLE_DETAIL, database_unavailable_headers
from seasons.memo import DATABASE_UNREACHABLE

logger = logging.getLogger(__name__)


class DatabaseUnavailableMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, DATABASE_UNREACHABLE):
            return None
        logger.warning("database unavailable on %s: %s", request.path, exception)
        response: HttpResponse
        if request.path.startswith("/api/"):
            response = JsonResponse({"detail": DATABASE_UNAVAILABLE_DETAIL}, status=503)
        else:
            response = HttpResponse(
                render_to_string("unavailable.html", {"detail": DATABASE_UNAVAILABLE_DETAIL}),
                status=503,
            )
        for name, value in database_unavailable_headers().items():
            response[name] = value
        return response
