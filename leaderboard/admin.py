"""Staff's view of the boards: match results and their voids, bans, the live board of a
season with its rebuild and reconcile actions, and the records of rebuilds and reconciles."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.utils.safestring import SafeString, mark_safe

from seasons import admin as seasons_admin
from seasons.admin import ReadOnlyAdmin, confirmed_action
from seasons.models import Season

from .board_scores import match_results_of_player
from .models import MatchResult, PlayerBan, RebuildRun, ReconcileRun
from .selectors import BoardOverview, season_board_overview_get
from .services import (
    Correction,
    board_reconcile,
    match_result_void,
    player_ban,
    player_unban,
)
from .tasks import board_rebuild_task, boards_correct_task


def _queue_board_corrections(correction: Correction) -> str:
    """Queue the rebuild of what a correction touched, once its transaction has committed."""
    days = [d.isoformat() for d in correction.days]
    transaction.on_commit(
        lambda: boards_correct_task.delay(season_id=correction.season_id, days=days)
    )
    return (
        f"season {correction.season_id}: the season board, {len(days)} daily board(s) and "
        "their weekly boards are being rebuilt (a closed season: review its final standings)"
    )


@admin.action(description="Void the selected results (asks for a reason)", permissions=["change"])
def void_match_results(
    modeladmin: admin.ModelAdmin[MatchResult],
    request: HttpRequest,
    queryset: QuerySet[MatchResult],
) -> TemplateResponse | None:
    reason = request.POST.get("reason", "").strip()
    if request.POST.get("confirmed") != "yes" or not reason:
        if request.POST.get("confirmed") == "yes":
            modeladmin.message_user(request, "A void needs a reason.", messages.ERROR)
        context = {
            **modeladmin.admin_site.each_context(request),
            "title": "Void match results",
            "queryset": queryset,
            "opts": modeladmin.model._meta,
            "action": "void_match_results",
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "admin/leaderboard/void_results.html", context)
    voided = 0
    by_season: dict[int, set[Any]] = {}
    for result_id in queryset.values_list("id", flat=True):
        correction = match_result_void(result_id=result_id, reason=reason)
        voided += int(correction.changed)
        by_season.setdefault(correction.season_id, set()).update(correction.days)
    for season_id, days in sorted(by_season.items()):
        note = _queue_board_corrections(Correction(season_id, tuple(sorted(days)), True))
        modeladmin.message_user(request, note, messages.INFO)
    modeladmin.message_user(request, f"{voided} result(s) voided.", messages.SUCCESS)
    return None


# --- Seasons: the live board, rebuild and reconcile ----------------------------------------------


@confirmed_action(
    description="Rebuild the selected seasons' boards from PostgreSQL",
    explanation=(
        "Queues a rebuild of each season's board and of its daily boards in Redis (the weekly "
        "boards built from them follow): each is recomputed from PostgreSQL and swapped in "
        "atomically; results ingested meanwhile are kept."
    ),
)
def rebuild_board(season: Season) -> str:
    board_rebuild_task.delay(season_id=season.id, reason="admin")
    return (
        f"season {season.id}: rebuild of the season, daily and weekly boards queued "
        "(the worker runs it; see Rebuild runs)"
    )


@confirmed_action(
    description="Reconcile the selected seasons' boards with PostgreSQL",
    explanation=(
        "Compares each season board's size and a sample of scores with PostgreSQL, records the "
        "drift (see Reconcile runs) and, if any, rebuilds the board."
    ),
)
def reconcile_boards(season: Season) -> str:
    result = board_reconcile(season_id=season.id)
    if result.run_id is None:
        return f"season {season.id}: a rebuild is running; nothing compared"
    if not result.drift_found:
        return f"season {season.id}: the board matches PostgreSQL"
    repaired = "rebuilt" if result.rebuilt else "NOT rebuilt (a rebuild was running)"
    return f"season {season.id}: drift found (reconcile run #{result.run_id}); board {repaired}"


class SeasonAdmin(seasons_admin.SeasonAdmin):
    actions = [*seasons_admin.SeasonAdmin.actions, rebuild_board, reconcile_boards]
    _live_fields = ("board_size", "last_snapshot_refresh", "live_top_100")

    def _overview(self, obj: Season) -> BoardOverview:
        cache = getattr(obj, "_board_overview", None)
        if cache is None:
            cache = season_board_overview_get(season=obj, limit=100)
            obj._board_overview = cache  # type: ignore[attr-defined]
        return cache

    @admin.display(description="Board size (Redis)")
    def board_size(self, obj: Season) -> int:
        return int(self._overview(obj).size)

    @admin.display(description="Top list snapshot refreshed at")
    def last_snapshot_refresh(self, obj: Season) -> str:
        refreshed = self._overview(obj).snapshot_refreshed_at
        return refreshed.isoformat() if refreshed else "never (no snapshot)"

    @admin.display(description="Live top 100 (Redis)")
    def live_top_100(self, obj: Season) -> SafeString:
        return mark_safe(  # noqa: S308 (the template escapes every value)
            render_to_string("admin/leaderboard/board_top.html", {"overview": self._overview(obj)})
        )


admin.site.unregister(Season)
admin.site.register(Season, SeasonAdmin)


@admin.register(MatchResult)
class MatchResultAdmin(admin.ModelAdmin):
    list_display = ("match_id", "player_id", "season", "points", "achieved_at", "voided_at")
    list_filter = ("season",)
    search_fields = ("=player_id", "=match_id")
    show_full_result_count = False  # COUNT(*) over tens of millions of rows is not free
    actions = (void_match_results,)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[MatchResult], search_term: str
    ) -> tuple[QuerySet[MatchResult], bool]:
        term = search_term.strip()
        if term.isascii() and term.isdigit() and len(term) < 20:
            # A player id: through the player index (a plain player_id filter reads the table).
            return match_results_of_player(player_id=int(term), queryset=queryset), False
        return super().get_search_results(request, queryset, search_term)


@admin.register(PlayerBan)
class PlayerBanAdmin(admin.ModelAdmin):
    list_display = ("player_id", "season", "reason", "created_by", "created_at")
    list_filter = ("season",)
    search_fields = ("=player_id", "reason")
    fields = ("season", "player_id", "reason")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # A ban is created or lifted, not edited: the boards follow those two events.
        return False

    def save_model(self, request: HttpRequest, obj: PlayerBan, form: Any, change: bool) -> None:
        user_id = getattr(request.user, "pk", None)
        correction = player_ban(
            season_id=obj.season_id,
            player_id=obj.player_id,
            reason=obj.reason,
            created_by_id=user_id,
        )
        # The admin goes on with `obj` (change log, redirect): make it the stored row.
        stored = PlayerBan.objects.get(season_id=obj.season_id, player_id=obj.player_id)
        obj.pk, obj.created_at, obj.created_by_id = (
            stored.pk,
            stored.created_at,
            stored.created_by_id,
        )
        obj._state.adding = False
        messages.info(request, _queue_board_corrections(correction))

    def delete_model(self, request: HttpRequest, obj: PlayerBan) -> None:
        correction = player_unban(season_id=obj.season_id, player_id=obj.player_id)
        messages.info(request, _queue_board_corrections(correction))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[PlayerBan]) -> None:
        for ban in queryset:
            self.delete_model(request, ban)


@admin.register(RebuildRun)
class RebuildRunAdmin(ReadOnlyAdmin):
    list_display = (
        "season",
        "day",
        "status",
        "members",
        "delta_members",
        "overflowed_count",
        "reason",
        "started_at",
        "finished_at",
    )
    list_filter = ("status", "season")


@admin.register(ReconcileRun)
class ReconcileRunAdmin(ReadOnlyAdmin):
    list_display = (
        "season",
        "day",
        "checked_at",
        "redis_members",
        "expected_members",
        "sample_size",
        "mismatched_scores",
        "drift_found",
        "rebuilt",
    )
    list_filter = ("drift_found", "rebuilt", "season")
