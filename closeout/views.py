"""Public pages of recurring competitions: every schedule, one schedule's current season with its
countdown and the archive of its closed seasons' final standings, and a player's history."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from leaderboard.models import MAIN_BOARD
from leaderboard.selectors.boards import BoardRef, board_get_cached, board_list_cached
from leaderboard.selectors.top import board_top_get
from leaderboard.throttling import throttled_page
from seasons.selectors import schedule_get, schedule_list, schedule_view

from .forms import ArchivePageForm
from .selectors import player_history, schedule_archive

ARCHIVE_PAGE = 10
CURRENT_TOP = 10


@throttled_page
@require_GET
def schedules_page(request: HttpRequest) -> HttpResponse:
    return render(request, "closeout/schedules.html", {"schedules": schedule_list()})


@throttled_page
@require_GET
def schedule_page(request: HttpRequest, slug: str) -> HttpResponse:
    schedule = schedule_get(slug=slug)
    if schedule is None:
        raise Http404(f"Schedule {slug[:40]!r} does not exist.")
    form = ArchivePageForm(request.GET)
    page = form.page_number()
    archived, total = schedule_archive(
        schedule=schedule, limit=ARCHIVE_PAGE, offset=(page - 1) * ARCHIVE_PAGE
    )
    view = schedule_view(schedule=schedule)
    # The current season's top 10, live from its board (as its own page reads it).
    current_top = None
    board = None
    league_boards: list[BoardRef] = []
    if view.current_season_id is not None:
        board = board_get_cached(season_id=view.current_season_id, slug=MAIN_BOARD)
        if board is not None:
            current_top = board_top_get(board=board, limit=CURRENT_TOP).entries
        league_boards = [b for b in board_list_cached(season_id=view.current_season_id) if b.tiers]
    context = {
        "schedule": view,
        "current_top": current_top,
        "current_board": board,
        "current_caption": f"The current season's top {len(current_top or ())}",
        "league_boards": league_boards,
        "archive": archived,
        "page": page,
        "has_next": page * ARCHIVE_PAGE < total,
        "closed_count": total,
        "errors": form.messages(),
    }
    return render(request, "closeout/schedule.html", context, status=400 if form.errors else 200)


HISTORY_PAGE = 50


@throttled_page
@require_GET
def player_history_page(request: HttpRequest, player_id: int) -> HttpResponse:
    form = ArchivePageForm(request.GET)
    page = form.page_number()
    items = player_history(
        player_id=player_id, limit=HISTORY_PAGE + 1, offset=(page - 1) * HISTORY_PAGE
    )
    context = {
        "player_id": player_id,
        "items": items[:HISTORY_PAGE],
        "page": page,
        "has_next": len(items) > HISTORY_PAGE,
        "errors": form.messages(),
    }
    return render(
        request, "closeout/player_history.html", context, status=400 if form.errors else 200
    )
