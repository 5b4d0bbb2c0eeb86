"""Public HTML pages, server-rendered over the same selectors as the JSON API.

The season page renders a full table on the server (it works without JavaScript, and a
search engine or a screen reader gets the data at once); ``static/leaderboard/live.js`` then
keeps the top list moving by polling the same JSON endpoint the page names in
``data-live-url`` (docs/read-api.md, "Live pages", says why polling and not server-sent events).

Redis or PostgreSQL not answering, or a board Redis lost, is a 503 page with Retry-After from
``leaderboard_project.middleware.UnavailableMiddleware``, for every page alike.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET
from django.views.defaults import page_not_found
from rest_framework.exceptions import ValidationError

from seasons.selectors import SeasonRef, season_get_cached, season_list

from .apis import top_list_etag
from .models import MAIN_BOARD
from .selectors.boards import BoardRef, board_get_cached, board_list_cached
from .selectors.rankings import (
    board_around_get,
    board_player_get,
    board_ranks_get,
    daily_board_top_get,
    weekly_board_top_get,
)
from .selectors.top import board_top_get
from .serializers import DayPathSerializer, IdField, RanksQuerySerializer, WeekPathSerializer
from .services import weekly_board_ensure
from .throttling import throttled_page

PAGE_TOP = 100
PAGE_RADIUS = 5

PERIODS = ("season", "daily", "weekly")


@throttled_page
@require_GET
def seasons_page(request: HttpRequest) -> HttpResponse:
    return render(request, "leaderboard/seasons.html", {"seasons": season_list()})


def _season_day(season: SeasonRef) -> date:
    """Today (UTC), moved inside the season's days: a finished season opens on its last day."""
    today = timezone.now().date()
    return min(max(today, season.starts_at.date()), season.ends_at.date())


def _board_path(ref: BoardRef) -> str:
    if ref.slug == MAIN_BOARD:
        return reverse("season-board-page", args=[ref.season_id])
    return reverse("board-page", args=[ref.season_id, ref.slug])


def _api_base(ref: BoardRef) -> str:
    return f"/api/seasons/{ref.season_id}/boards/{ref.slug}"


def _first_error(exc: ValidationError) -> str:
    detail: Any = exc.detail
    if isinstance(detail, dict):
        detail = next(iter(detail.values()))
    if isinstance(detail, list):
        detail = detail[0]
    return str(detail)


@throttled_page
@require_GET
def season_board_page(
    request: HttpRequest, season_id: int, board: str = MAIN_BOARD
) -> HttpResponse:
    """A board's list: the season-long top 100 (live), a day's or an ISO week's top 100
    (``?period=daily&day=...``, ``?period=weekly&week=...``, live too), or a page of 100 from
    any rank (``?start=3456789``); and a player lookup (``?player=42``) with their rank,
    percentile, points to the next rank and the entries around them."""
    season = season_get_cached(season_id=season_id)
    if season is None:
        raise Http404(f"Season {season_id} does not exist.")
    ref = board_get_cached(season_id=season_id, slug=board)
    if ref is None:
        raise Http404(f"Season {season_id} has no board {board[:40]!r}.")
    page_path = _board_path(ref)
    api = _api_base(ref)
    season_day = _season_day(season)
    iso_year, iso_week, _ = season_day.isocalendar()
    context: dict[str, Any] = {
        "season": season,
        "board": ref,
        "boards": board_list_cached(season_id=season_id),
        "page_path": page_path,
        "default_day": season_day,
        "default_week": f"{iso_year:04d}-W{iso_week:02d}",
        "errors": [],
    }
    errors: list[str] = context["errors"]

    period = request.GET.get("period", "season")
    if period not in PERIODS:
        errors.append(f"{period[:20]!r} is not a period (season, daily or weekly).")
        period = "season"
    context["period"] = period

    start = 1
    if period == "season" and request.GET.get("start", "").strip():
        try:
            query = RanksQuerySerializer().run_validation(
                {"start": request.GET["start"].strip(), "count": PAGE_TOP}
            )
        except ValidationError as exc:
            errors.append(f"Rank: {_first_error(exc)}")
        else:
            start = int(query["start"])
    context["start"] = start

    if period == "daily":
        raw_day = request.GET.get("day") or season_day.isoformat()
        try:
            day = DayPathSerializer().run_validation({"season": season_id, "day": raw_day})["day"]
        except ValidationError as exc:
            errors.append(f"Day: {_first_error(exc)}")
            day = season_day
        context.update(
            entries=daily_board_top_get(board=ref, day=day, limit=PAGE_TOP),
            caption=f"{ref.name}: top {PAGE_TOP} of {day.isoformat()} (UTC day)",
            live_url=f"{api}/daily/{day.isoformat()}/top?limit={PAGE_TOP}",
            day=day,
        )
    elif period == "weekly":
        raw_week = request.GET.get("week") or context["default_week"]
        try:
            year, week = WeekPathSerializer().run_validation(
                {"season": season_id, "week": raw_week}
            )["week"]
        except ValidationError as exc:
            errors.append(f"Week: {_first_error(exc)}")
            year, week = iso_year, iso_week
        weekly_board_ensure(board=ref, iso_year=year, iso_week=week, today=timezone.now().date())
        label = f"{year:04d}-W{week:02d}"
        context.update(
            entries=weekly_board_top_get(board=ref, iso_year=year, iso_week=week, limit=PAGE_TOP),
            caption=f"{ref.name}: top {PAGE_TOP} of week {label}",
            live_url=f"{api}/weekly/{label}/top?limit={PAGE_TOP}",
            week=label,
        )
    elif start > 1:
        # A deep page is not polled: /ranks carries no ETag, and a page far down moves under
        # the reader's eyes without telling them anything; they reload it when they want.
        entries = board_ranks_get(board=ref, start_rank=start, count=PAGE_TOP)
        context.update(
            entries=entries,
            caption=f"{ref.name}: ranks from {start:,}",
            live_url="",
            previous_start=max(1, start - PAGE_TOP),
            next_start=start + PAGE_TOP if len(entries) == PAGE_TOP else None,
        )
    else:
        top = board_top_get(board=ref, limit=PAGE_TOP)
        context.update(
            entries=top.entries,
            caption=f"{ref.name}: top {PAGE_TOP} of the season",
            live_url=f"{api}/top?limit={PAGE_TOP}",
            # live.js ignores a poll that answers an older list than this one.
            live_version=top.version,
            live_etag=top_list_etag(board=ref, top=top, limit=PAGE_TOP),
            next_start=PAGE_TOP + 1 if len(top.entries) == PAGE_TOP else None,
        )

    raw_player = request.GET.get("player", "").strip()
    if raw_player:
        context["player_query"] = raw_player
        try:
            player_id = IdField().to_internal_value(raw_player)
        except ValidationError:
            context["lookup_error"] = (
                f"{raw_player[:40]!r} is not a player id (a positive integer)."
            )
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
    """404 handler: JSON under /api/ (the API's error shape), the site's page elsewhere
    (templates/404.html, which says what was not found)."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": f"no such endpoint: {request.path}"}, status=404)
    return page_not_found(request, exception)
