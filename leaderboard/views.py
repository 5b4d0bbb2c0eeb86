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

from django.conf import settings
from django.core.paginator import InvalidPage, Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import Resolver404, reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from seasons.selectors import SeasonRef, season_get_cached

from .apis import top_list_etag
from .forms import BoardPageForm, BoardPageQuery, iso_week_label
from .models import MAIN_BOARD
from .selectors.boards import (
    BoardRef,
    board_get_cached,
    board_list_cached,
    season_list_with_main_rule,
)
from .selectors.cohorts import board_cohorts_last, cohort_standing_get, player_cohort_get
from .selectors.leagues import league_waiting_for
from .selectors.pages import (
    BoardPage,
    board_daily_page_get,
    board_season_page_get,
    board_weekly_page_get,
)
from .selectors.tournaments import board_participants_get
from .services import weekly_board_ensure
from .throttling import throttled_page

PAGE_TOP = 100
PAGE_RADIUS = 5
# Seasons a page of the seasons list: a schedule adds one each occurrence.
SEASONS_PER_PAGE = 50


@throttled_page
@require_GET
def seasons_page(request: HttpRequest) -> HttpResponse:
    paginator = Paginator(season_list_with_main_rule(), SEASONS_PER_PAGE)
    try:
        page = paginator.page(request.GET.get("page") or 1)
    except InvalidPage as exc:
        raise Http404(f"no such page of seasons: {exc}") from exc
    return render(request, "leaderboard/seasons.html", {"page": page})


@throttled_page
@require_GET
def season_board_page(
    request: HttpRequest, season_id: int, board: str = MAIN_BOARD
) -> HttpResponse:
    """A board's list: the season-long top 100 (live), a day's or an ISO week's top 100
    (``?period=daily&day=...``, ``?period=weekly&week=...``, live too), or a page of 100 from
    any rank (``?start=3456789``); and a player lookup (``?player=42``) with their rank,
    percentile, points to the next rank and the entries around them. A refused parameter is
    a 400 page that says why, showing the board as if it had not been given."""
    season, ref = _season_board_or_404(season_id=season_id, slug=board)
    form = BoardPageForm(request.GET, default_day=_season_day(season))
    query = form.page_query()
    page = _board_page_read(board=ref, query=query)
    context = _board_page_context(
        season=season, board=ref, query=query, page=page, errors=form.messages()
    )
    if ref.cohort_size is not None and page.lookup is not None and page.lookup.standing:
        context["cohort"] = player_cohort_get(board=ref, player_id=page.lookup.player_id)
    if ref.tiers and ref.league_waiting:
        context["waiting_for"] = league_waiting_for(board=ref)
    return render(
        request, "leaderboard/season_board.html", context, status=400 if form.errors else 200
    )


@throttled_page
@require_GET
def board_cohort_page(
    request: HttpRequest, season_id: int, board: str, cohort: int
) -> HttpResponse:
    """One cohort of a board with cohorts, ranked, with each member's global rank."""
    season, ref = _season_board_or_404(season_id=season_id, slug=board)
    standing = cohort_standing_get(board=ref, number=cohort) if ref.cohort_size else None
    if standing is None:
        raise Http404(f"Board {ref.slug!r} of season {season_id} has no group {cohort}.")
    context = {
        "season": season,
        "board": ref,
        "boards": board_list_cached(season_id=ref.season_id),
        "cohort": standing,
        "caption": f"{ref.name}: group {cohort}, ranked within the group",
        "page_path": _board_path(ref),
        "previous_cohort": cohort - 1 if cohort > 1 else None,
        "next_cohort": cohort + 1 if cohort < board_cohorts_last(board_id=ref.id) else None,
    }
    return render(request, "leaderboard/cohort.html", context)


def _season_board_or_404(*, season_id: int, slug: str) -> tuple[SeasonRef, BoardRef]:
    season = season_get_cached(season_id=season_id)
    if season is None:
        raise Http404(f"Season {season_id} does not exist.")
    ref = board_get_cached(season_id=season_id, slug=slug)
    if ref is None:
        raise Http404(f"Season {season_id} has no board {slug[:40]!r}.")
    return season, ref


def _season_day(season: SeasonRef) -> date:
    """Today (UTC), moved inside the season's days: a finished season opens on its last day."""
    today = timezone.now().date()
    return min(max(today, season.starts_at.date()), season.ends_at.date())


def _board_page_read(*, board: BoardRef, query: BoardPageQuery) -> BoardPage:
    """The one read of the query's period."""
    if query.period == "daily":
        return board_daily_page_get(
            board=board,
            day=query.day,
            count=PAGE_TOP,
            player_id=query.player_id,
            radius=PAGE_RADIUS,
        )
    if query.period == "weekly":
        # As the weekly API: a started week's missing board is built on its first request.
        built = weekly_board_ensure(
            board=board,
            iso_year=query.iso_year,
            iso_week=query.iso_week,
            today=timezone.now().date(),
        )
        return board_weekly_page_get(
            board=board,
            iso_year=query.iso_year,
            iso_week=query.iso_week,
            count=PAGE_TOP,
            player_id=query.player_id,
            radius=PAGE_RADIUS,
            primary=built,
        )
    return board_season_page_get(
        board=board,
        start_rank=query.start,
        count=PAGE_TOP,
        player_id=query.player_id,
        radius=PAGE_RADIUS,
    )


def _board_path(ref: BoardRef) -> str:
    if ref.slug == MAIN_BOARD:
        return reverse("season-board-page", args=[ref.season_id])
    return reverse("board-page", args=[ref.season_id, ref.slug])


def _api_base(ref: BoardRef) -> str:
    return f"/api/seasons/{ref.season_id}/boards/{ref.slug}"


def _board_page_context(
    *,
    season: SeasonRef,
    board: BoardRef,
    query: BoardPageQuery,
    page: BoardPage,
    errors: list[str],
) -> dict[str, Any]:
    """What templates/leaderboard/season_board.html reads."""
    api = _api_base(board)
    default_year, default_week, _ = query.default_day.isocalendar()
    context: dict[str, Any] = {
        "season": season,
        "board": board,
        "boards": board_list_cached(season_id=board.season_id),
        "page_path": _board_path(board),
        "default_day": query.default_day,
        "default_week": iso_week_label(default_year, default_week),
        "errors": errors,
        "period": query.period,
        "start": query.start,
        "entries": page.entries,
    }
    if board.join_required:
        context["joined"] = board_participants_get(boards=[board]).get(board.id)
    if query.period == "daily":
        day = query.day.isoformat()
        context.update(
            caption=f"{board.name}: top {PAGE_TOP} of {day} (UTC day)",
            live_url=f"{api}/daily/{day}/top?limit={PAGE_TOP}",
            day=query.day,
        )
    elif query.period == "weekly":
        context.update(
            caption=f"{board.name}: top {PAGE_TOP} of week {query.week}",
            live_url=f"{api}/weekly/{query.week}/top?limit={PAGE_TOP}",
            week=query.week,
        )
    elif page.top is None:
        # A deep page is not polled: /ranks carries no ETag, and a page far down moves under
        # the reader's eyes without telling them anything; they reload it when they want.
        context.update(
            caption=f"{board.name}: ranks from {query.start:,}",
            live_url="",
            previous_start=max(1, query.start - PAGE_TOP),
            next_start=query.start + PAGE_TOP if len(page.entries) == PAGE_TOP else None,
        )
    else:
        context.update(
            caption=f"{board.name}: top {PAGE_TOP} of the season",
            live_url=f"{api}/top?limit={PAGE_TOP}",
            # The board stream pushes this list as it changes; live.js polls when it is down.
            stream_url=(
                f"{settings.BOARD_STREAM_URL}/stream/seasons/{board.season_id}/boards/{board.slug}"
                if settings.BOARD_STREAM_URL
                else ""
            ),
            # live.js ignores a poll that answers an older list than this one.
            live_version=page.top.version,
            live_etag=top_list_etag(board=board, top=page.top, limit=PAGE_TOP),
            next_start=PAGE_TOP + 1 if len(page.entries) == PAGE_TOP else None,
        )
    if query.player_query:
        context["player_query"] = query.player_query
    lookup = page.lookup
    if lookup is not None:
        if lookup.standing is None:
            where = "this season" if board.slug == MAIN_BOARD else "on this board"
            context["lookup_error"] = f"Player {lookup.player_id} has no score {where}."
        else:
            context["standing"] = lookup.standing
            context["around"] = lookup.around
    return context


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """404 handler: JSON under /api/ (the API's error shape), the site's page elsewhere
    (templates/404.html, which says what was not found)."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": f"no such endpoint: {request.path}"}, status=404)
    # What a view said (an Http404 with a message: "season 12 has no board 'cup'"), else the
    # path. Django's own handler names the exception's class where it has no message: a URL
    # that matched no route read "Resolver404".
    said = exception.args[0] if isinstance(exception, Http404) and exception.args else None
    message = said if isinstance(said, str) and not isinstance(exception, Resolver404) else ""
    return render(
        request, "404.html", {"request_path": request.path, "exception": message}, status=404
    )
