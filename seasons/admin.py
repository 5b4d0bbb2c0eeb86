"""Staff's view of seasons: live board, reward tiers, final standings, grants, actions.

Every action asks for confirmation first, then calls one service per season and says what
happened. To add an action, write a function with the ``confirmed_action`` decorator and
append it to ``SeasonAdmin.actions``.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable
from itertools import pairwise
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.utils.safestring import SafeString, mark_safe

from leaderboard.admin import review_final_standings

from .models import FinalStanding, RewardGrant, RewardTier, Season, SeasonStatus
from .selectors import season_board_overview_get
from .services import (
    CloseOutcome,
    season_close,
    season_create,
    season_status_transition,
)

# --- Shared pieces -------------------------------------------------------------------------------

SeasonActionHandler = Callable[[Season], str]


def confirmed_action(
    *, description: str, explanation: str
) -> Callable[[SeasonActionHandler], Callable[..., TemplateResponse | None]]:
    """Turn ``handler(season) -> message`` into an admin action with a confirmation page.

    The first POST shows what will happen; the confirmed POST runs the handler for each
    season and reports each outcome (a ValidationError becomes an error message).
    """

    def wrap(handler: SeasonActionHandler) -> Callable[..., TemplateResponse | None]:
        def action(
            modeladmin: admin.ModelAdmin[Season], request: HttpRequest, queryset: QuerySet[Season]
        ) -> TemplateResponse | None:
            if request.POST.get("confirmed") != "yes":
                context = {
                    **modeladmin.admin_site.each_context(request),
                    "title": description,
                    "description": explanation,
                    "queryset": queryset,
                    "opts": modeladmin.model._meta,
                    "action": handler.__name__,
                    "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
                }
                return TemplateResponse(request, "admin/seasons/confirm_action.html", context)
            for season in queryset.order_by("id"):
                try:
                    modeladmin.message_user(request, handler(season), messages.SUCCESS)
                except ValidationError as exc:
                    modeladmin.message_user(
                        request, f"season {season.id}: {'; '.join(exc.messages)}", messages.ERROR
                    )
            return None

        action.__name__ = handler.__name__
        return admin.action(description=description, permissions=["change"])(action)

    return wrap


def csv_export_action(*, fields: tuple[str, ...], filename: str) -> Callable[..., HttpResponse]:
    # Reading rows out needs "view", stated so the action never outlives that permission.
    @admin.action(description="Export selected rows as CSV", permissions=["view"])
    def export_csv(
        modeladmin: admin.ModelAdmin[Any], request: HttpRequest, queryset: QuerySet[Any]
    ) -> HttpResponse:
        response = HttpResponse(content_type="text/csv")
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        writer = csv.writer(response)
        writer.writerow(fields)
        rows: Iterable[tuple[Any, ...]] = queryset.values_list(*fields).iterator()
        for row in rows:
            writer.writerow(row)
        return response

    return export_csv


# --- Season actions ------------------------------------------------------------------------------


@confirmed_action(
    description="Close out the selected seasons",
    explanation=(
        "Each season stops taking new results now (those achieved before its end and still "
        "queued are still counted). Once the consumer has drained the topic, its final "
        "standings are copied from PostgreSQL, rewards are granted by tier and its Redis keys "
        "are dropped; until then the periodic close-out keeps checking. Running it again "
        "grants nothing twice."
    ),
)
def close_season(season: Season) -> str:
    # One look at the consumer's offsets, no waiting inside a web request.
    result = season_close(season_id=season.id, drain_timeout_seconds=0)
    if result.outcome == CloseOutcome.LAGGING:
        raise ValidationError(result.describe())  # shown as an error, not a success
    return result.describe()


@confirmed_action(
    description="Rebuild the selected seasons' boards from PostgreSQL",
    explanation=(
        "Queues a rebuild of each season's board and of its daily boards in Redis (the weekly "
        "boards built from them follow): each is recomputed from PostgreSQL and swapped in "
        "atomically; results ingested meanwhile are kept."
    ),
)
def rebuild_board(season: Season) -> str:
    from leaderboard.tasks import board_rebuild_task

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
    from leaderboard.services import board_reconcile

    result = board_reconcile(season_id=season.id)
    if result.run_id is None:
        return f"season {season.id}: a rebuild is running; nothing compared"
    if not result.drift_found:
        return f"season {season.id}: the board matches PostgreSQL"
    repaired = "rebuilt" if result.rebuilt else "NOT rebuilt (a rebuild was running)"
    return f"season {season.id}: drift found (reconcile run #{result.run_id}); board {repaired}"


@confirmed_action(
    description="Start the selected seasons now (active)",
    explanation="Each scheduled season starts taking results now, even before its start date.",
)
def make_active(season: Season) -> str:
    season_status_transition(season_id=season.id, to_status=SeasonStatus.ACTIVE)
    return f"season {season.id} is active: it takes results"


@confirmed_action(
    description="Stop taking results (closing)",
    explanation=(
        "Each season stops taking results achieved after its end; the close-out task "
        "finishes it once the consumer has drained. It can be reopened before its end date."
    ),
)
def make_closing(season: Season) -> str:
    season_status_transition(season_id=season.id, to_status=SeasonStatus.CLOSING)
    return f"season {season.id} is closing: it takes no more results"


# --- Admin classes -------------------------------------------------------------------------------


class RewardTierFormSet(BaseInlineFormSet):
    def clean(self) -> None:
        super().clean()
        ranges = []
        for form in self.forms:
            data = getattr(form, "cleaned_data", None)
            if not data or data.get("DELETE") or data.get("rank_from") is None:
                continue
            ranges.append((data["rank_from"], data.get("rank_to") or data["rank_from"]))
        ranges.sort()
        for (low_a, high_a), (low_b, high_b) in pairwise(ranges):
            if low_b <= high_a:
                raise forms.ValidationError(
                    f"tiers {low_a}-{high_a} and {low_b}-{high_b} overlap: a rank has one tier"
                )


class RewardTierInline(admin.TabularInline):
    model = RewardTier
    formset = RewardTierFormSet
    extra = 1
    fields = ("rank_from", "rank_to", "reward_name", "quantity")

    def _editable(self, obj: Season | None) -> bool:
        return obj is None or obj.status != SeasonStatus.CLOSED

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._editable(obj) and super().has_add_permission(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._editable(obj) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._editable(obj) and super().has_delete_permission(request, obj)


@admin.register(Season)
class SeasonAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "status", "rule", "starts_at", "ends_at", "closed_at")
    list_filter = ("status", "rule")
    search_fields = ("name", "=id")
    inlines = [RewardTierInline]
    actions = [
        close_season,
        rebuild_board,
        reconcile_boards,
        review_final_standings,
        make_active,
        make_closing,
    ]
    _always_read_only = (
        "status",
        "time_bits",
        "created_at",
        "updated_at",
        "closing_since",
        "drain_end_offsets",
        "closed_at",
    )
    _live_fields = ("board_size", "last_snapshot_refresh", "live_top_100")

    def get_readonly_fields(self, request: HttpRequest, obj: Season | None = None) -> list[str]:
        fields = list(self._always_read_only)
        if obj is not None:
            # The encoded scores on the board depend on these: fixed once the season exists.
            fields += ["id", "starts_at", "rule", "time_resolution_seconds", *self._live_fields]
        return fields

    def get_fields(self, request: HttpRequest, obj: Season | None = None) -> tuple[str, ...]:
        fields: tuple[str, ...] = (
            "id",
            "name",
            "starts_at",
            "ends_at",
            "rule",
            "time_resolution_seconds",
        )
        if obj is not None:
            fields += (*self._always_read_only, *self._live_fields)
        return fields

    def save_model(self, request: HttpRequest, obj: Season, form: Any, change: bool) -> None:
        if change:
            obj.full_clean(exclude=["time_bits"])
            # Only what the form changed: a full save would write back the status, closing and
            # drain fields as loaded, undoing a close-out that ran while the form was open.
            obj.save(update_fields=[*form.changed_data, "updated_at"])
            return
        # Through the service, which fixes the codec split from the season's length.
        created = season_create(
            season_id=obj.id,
            name=obj.name,
            starts_at=obj.starts_at,
            ends_at=obj.ends_at,
            rule=obj.rule,
            time_resolution_seconds=obj.time_resolution_seconds,
        )
        obj.time_bits = created.time_bits
        obj._state.adding = False

    def _overview(self, obj: Season) -> Any:
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
            render_to_string("admin/seasons/board_top.html", {"overview": self._overview(obj)})
        )


class _ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(FinalStanding)
class FinalStandingAdmin(_ReadOnlyAdmin):
    list_display = ("season", "rank", "player_id", "points", "reached_at")
    list_filter = ("season",)
    search_fields = ("=player_id",)
    list_select_related = ("season",)
    actions = [
        csv_export_action(
            fields=("season_id", "rank", "player_id", "points", "reached_at"),
            filename="final_standings.csv",
        )
    ]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(RewardGrant)
class RewardGrantAdmin(_ReadOnlyAdmin):
    list_display = ("season", "rank", "player_id", "reward_name", "quantity", "status")
    list_filter = ("season", "status")
    list_editable = ("status",)
    search_fields = ("=player_id",)
    list_select_related = ("season",)
    fields = ("season", "tier", "rank", "player_id", "reward_name", "quantity", "status")
    readonly_fields = ("season", "tier", "rank", "player_id", "reward_name", "quantity")
    actions = [
        csv_export_action(
            fields=(
                "season_id",
                "rank",
                "player_id",
                "reward_name",
                "quantity",
                "status",
                "created_at",
            ),
            filename="reward_grants.csv",
        )
    ]
