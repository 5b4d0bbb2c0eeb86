"""Project-wide middleware: requests no view should see, and failures every view shares.

- ``ControlCharacterPathMiddleware``: a path with a control character names nothing; 404
  before any view parses it (PostgreSQL refuses a NUL in a text parameter with a DataError,
  which a view would turn into a 500).
- ``UnavailableMiddleware``: PostgreSQL or Redis unavailable, or a board Redis lost: a 503
  with Retry-After everywhere, never a 500 or a wrong answer. The read API's own handler
  (``leaderboard.apis.api_exception_handler``) answers its views; this middleware answers every
  other view with the same classification (``leaderboard.unavailable``): the HTML pages, the
  ingestion door's token lookup, the admin. JSON under /api/ (the API's error shape,
  ``{"detail", "code"}``), an HTML page elsewhere: the leaderboard's "rankings cannot be read"
  page when the boards are the cause, a short one naming the cause otherwise.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.views.defaults import page_not_found

from leaderboard.unavailable import unavailable_of

logger = logging.getLogger(__name__)

# C0 controls and DEL. The WSGI server has already decoded %XX escapes, so "%00" and a raw NUL
# byte in the request line both arrive here as U+0000 (when the server lets a raw one through).
_CONTROL_CHARACTER = re.compile("[\x00-\x1f\x7f]")


class ControlCharacterPathMiddleware:
    """404 for any path that holds a control character, on every route.

    No season, board, player, day, admin object or file has such a name, so the answer is the
    same as for any other unknown path, but decided here, once, before a URL converter or a view
    passes the text on (to PostgreSQL, to Redis, into a log line or a redirect).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        found = _CONTROL_CHARACTER.search(request.path)
        if found is None:
            return self.get_response(request)
        what = f"the path contains a control character (U+{ord(found.group()):04X})"
        if request.path.startswith("/api/"):
            return JsonResponse({"detail": f"no such endpoint: {what}"}, status=404)
        return page_not_found(request, Http404(f"There is no page here: {what}."))


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
