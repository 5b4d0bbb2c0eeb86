"""PostgreSQL or Redis unavailable, or a board Redis lost: a 503 with Retry-After everywhere,
never a 500 or a wrong answer.

The read API's own handler (``leaderboard.apis.api_exception_handler``) answers its views; this
middleware answers every other view with the same classification (``leaderboard.unavailable``):
the HTML pages, the ingestion door's token lookup, the admin. JSON under /api/ (the API's error
shape, ``{"detail", "code"}``), an HTML page elsewhere: the leaderboard's "rankings cannot be
read" page when the boards are the cause, a short one naming the cause otherwise.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

from leaderboard.unavailable import unavailable_of

logger = logging.getLogger(__name__)


class UnavailableMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        unavailable = unavailable_of(exception)
        if unavailable is None:
            return None
        logger.warning("%s on %s: %s", unavailable.code, request.path, exception)
        response: HttpResponse
        if request.path.startswith("/api/"):
            response = JsonResponse(unavailable.body(), status=503)
        elif unavailable.boards:
            response = HttpResponse(
                render_to_string(
                    "leaderboard/unavailable.html",
                    {"retry_seconds": unavailable.retry_after},
                    request=request,
                ),
                status=503,
            )
        else:
            response = HttpResponse(
                render_to_string("unavailable.html", {"detail": unavailable.detail}),
                status=503,
            )
        for name, value in unavailable.headers().items():
            response[name] = value
        return response
