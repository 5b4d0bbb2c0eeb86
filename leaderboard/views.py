"""Public HTML pages, server-rendered over the same selectors as the JSON API."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from django.views.defaults import page_not_found
from rest_framework.exceptions import ValidationError

from seasons.selectors import SeasonRef, season_get_cached, season_list

from .apis import RECOVERY_RETRY_AFTER_SECONDS
from .models import MAIN_BOARD
from .selectors import (
    BoardRef,
    BoardUnavailableError,
    board_around_get,
    board_get_cached,
    board_list,
    board_player_get,
    board_top_get,
)
from .serializers import IdField
from .throttling import throttled_page

PAGE_TOP = 100
PAGE_RADIUS = 5


@throttled_page
@require_GET
def seasons_page(request: HttpRequest) -> HttpResponse:
    return render(request, "leaderboard/seasons.html", {"seasons": season_list()})


@throttled_page
@require_GET
def season_board_page(
    request: HttpRequest, season_id: int, board: str = MAIN_BOARD
) -> HttpResponse:
    """A board's top 100 (the season's boards as tabs), and a player lookup (?player=42) with
    the entries around them."""
    season = season_get_cached(season_id=season_id)
    if season is None:
        raise Http404(f"season {season_id} does not exist")
    ref = board_get_cached(season_id=season_id, slug=board)
    if ref is None:
        raise Http404(f"season {season_id} has no board {board!r}")
    try:
        return _board_page(request, season=season, ref=ref)
    except BoardUnavailableError as exc:
        response = HttpResponse(str(exc), status=503, content_type="text/plain")
        response["Retry-After"] = str(RECOVERY_RETRY_AFTER_SECONDS)
        return response


def _board_page(request: HttpRequest, *, season: SeasonRef, ref: BoardRef) -> HttpResponse:
    context: dict[str, object] = {
        "season": season,
        "board": ref,
        "boards": board_list(season_id=season.id),
        "top": board_top_get(board=ref, limit=PAGE_TOP).entries,
    }
    raw_player = request.GET.get("player", "").strip()
    if raw_player:
        context["player_query"] = raw_player
        try:
            player_id = IdField().to_internal_value(raw_player)
        except ValidationError:
            context["lookup_error"] = f"{raw_player!r} is not a player id (a positive integer)."
        else:
            standing = board_player_get(board=ref, player_id=player_id)
            if standing is None:
                where = "this season" if ref.slug == MAIN_BOARD else "on this board"
                context["lookup_error"] = f"Player {player_id} has no score {where}."
            else:
                context["standing"] = standing
                context["around"] = board_around_get(
                    board=ref, player_id=player_id, radius=PAGE_RADIUS
                )
    return render(request, "leaderboard/season_board.html", context)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """404 handler: JSON under /api/ (the API's error shape), Django's page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": f"no such endpoint: {request.path}"}, status=404)
    return page_not_found(request, exception)
