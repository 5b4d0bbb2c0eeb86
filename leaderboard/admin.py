"""Staff corrections (voids, bans), and the records of rebuilds and reconciles.

The actions for other apps' admins live here too (``void_match_results`` for match results,
``review_final_standings`` and ``reconcile_boards`` for seasons): they are leaderboard
maintenance, registered by those admins.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse

from ingestion.models import MatchResult
from leaderboard.models import PlayerBan, RebuildRun, ReconcileRun
from leaderboard.services import (
    Correction,
    match_result_void,
    player_ban,
    player_unban,
    season_standings_correct,
    season_standings_review,
)
from seasons.models import Season


def _queue_board_corrections(correction: Correction) -> str:
    """Queue the rebuild of what a correction touched, once its transaction has committed."""
    from leaderboard.tasks import boards_correct_task

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


@admin.action(
    description="Review corrected final standings (closed seasons)", permissions=["change"]
)
def review_final_standings(
    modeladmin: admin.ModelAdmin[Season], request: HttpRequest, queryset: QuerySet[Season]
) -> TemplateResponse | None:
    fingerprint = request.POST.get("fingerprint")
    if fingerprint:
        for season in queryset:
            try:
                review = season_standings_correct(season_id=season.id, fingerprint=fingerprint)
            except ValidationError as exc:
                modeladmin.message_user(
                    request, f"season {season.id}: {'; '.join(exc.messages)}", messages.ERROR
                )
                continue
            modeladmin.message_user(
                request,
                f"season {season.id}: {len(review.standings)} standing(s) and "
                f"{len(review.grants)} grant(s) corrected.",
                messages.SUCCESS,
            )
        return None
    reviews = []
    for season in queryset.order_by("id"):
        try:
            reviews.append(season_standings_review(season_id=season.id))
        except ValidationError as exc:
            modeladmin.message_user(
                request, f"season {season.id}: {'; '.join(exc.messages)}", messages.ERROR
            )
    if not reviews:
        return None
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": "Corrected final standings and grants",
        "reviews": reviews,
        "opts": modeladmin.model._meta,
        "action": "review_final_standings",
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
    }
    return TemplateResponse(request, "admin/leaderboard/standings_review.html", context)


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


class _RecordAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(RebuildRun)
class RebuildRunAdmin(_RecordAdmin):
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
class ReconcileRunAdmin(_RecordAdmin):
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
