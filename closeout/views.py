"""Public pages of recurring competitions: every schedule, one schedule's current season with its
countdown and the archive of its closed seasons' final standings, and a player's history."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from leaderboard.throttling import throttled_page
from seasons.selectors import schedule_get, schedule_list, schedule_view

from .forms import ArchivePageForm
from .selectors import player_history, schedule_archive

ARCHIVE_PAGE = 10


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
    context = {
        "schedule": schedule_view(schedule=schedule),
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
