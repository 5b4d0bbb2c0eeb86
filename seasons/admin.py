"""The season's own admin pieces, and the admin pieces every app shares.

The Season admin is assembled once, in ``leaderboard_project.admin``, from each app's pieces:
``SeasonAdminBase`` and the transition actions here, the boards from leaderboard, the reward
tiers and close-out from closeout. No app registers a Season admin of its own.

Every action asks for confirmation first, then calls one service per season and says what
happened. To add an action, write a function with the ``confirmed_action`` decorator in the
app that owns it and list it in the ``actions`` of ``leaderboard_project.admin.SeasonAdmin``.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db import connections
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.functional import cached_property

from .models import Season, SeasonStatus
from .services import season_create, season_status_transition

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
        # A related field is headed by its relation: board__slug is "board".
        writer.writerow(field.split("__")[0] for field in fields)
        rows: Iterable[tuple[Any, ...]] = queryset.values_list(*fields).iterator()
        for row in rows:
            writer.writerow(row)
        return response

    return export_csv


class EstimatedCountPaginator(Paginator):
    """Pages of a table of millions of rows (match results, standings, grants, history): the
    rows are counted exactly up to ``exact_limit``, past it the count is PostgreSQL's planner
    estimate for the list's query. Django's own paginator runs a COUNT(*) of the whole list on
    every page, seconds of reading on tens of millions of rows; this one reads at most
    ``exact_limit`` + 1 index entries and asks the planner for the rest."""

    exact_limit = 10_000

    @cached_property
    def count(self) -> int:
        queryset = self.object_list
        if not isinstance(queryset, QuerySet):
            return super().count
        bounded = queryset.order_by()[: self.exact_limit + 1].count()
        if bounded <= self.exact_limit:
            return bounded
        return max(bounded, _planned_rows(queryset))


def _planned_rows(queryset: QuerySet[Any]) -> int:
    """How many rows PostgreSQL's planner expects ``queryset`` to return."""
    sql, params = queryset.order_by().query.sql_with_params()
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        plan = cursor.fetchone()[0]
    if isinstance(plan, str):  # a driver that does not decode json
        plan = json.loads(plan)
    return int(plan[0]["Plan"]["Plan Rows"])


# --- Season actions ------------------------------------------------------------------------------


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


class SeasonAdminBase(admin.ModelAdmin):
    """The season's own list, fields and save, unregistered: leaderboard_project.admin adds the
    other apps' inlines, mixins and actions to it and registers the result (seasons, at the
    bottom of the layers, knows none of them)."""

    list_display = ("id", "name", "status", "starts_at", "ends_at", "closed_at", "schedule")
    list_filter = ("status", "schedule")
    search_fields = ("name", "=id")
    _always_read_only = (
        "schedule",
        "occurrence",
        "status",
        "created_at",
        "updated_at",
        "closing_since",
        "drain_end_offsets",
        "closed_at",
        "results_pruned_at",
    )
    # Read-only fields that layers above add (leaderboard's live boards).
    _live_fields: tuple[str, ...] = ()

    def get_readonly_fields(self, request: HttpRequest, obj: Season | None = None) -> list[str]:
        fields = list(self._always_read_only)
        if obj is not None:
            # The boards' encoded scores count ticks from the start: fixed once it exists.
            fields += ["id", "starts_at", *self._live_fields]
        return fields

    def get_fields(self, request: HttpRequest, obj: Season | None = None) -> tuple[str, ...]:
        fields: tuple[str, ...] = (
            "id",
            "name",
            "starts_at",
            "ends_at",
        )
        if obj is not None:
            fields += (*self._always_read_only, *self._live_fields)
        return fields

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, ...]:
        refusals = self.deletion_refusals(seasons=list(objs))
        if refusals:
            # Django's confirmation page lists every related row it would delete or that
            # protects the season (a season's results and standings: millions), loading them
            # all; refused first, the page shows these reasons alone and deletes nothing.
            return [], {}, set(), refusals
        return super().get_deleted_objects(objs, request)

    def deletion_refusals(self, *, seasons: list[Season]) -> list[str]:
        """Why these seasons cannot be deleted (a layer above adds its own reasons)."""
        return [
            f"Season {season.pk} is closed: its final standings, grants and history are what "
            "its players were told, and stay."
            for season in seasons
            if season.status == SeasonStatus.CLOSED
        ]

    def save_model(self, request: HttpRequest, obj: Season, form: Any, change: bool) -> None:
        if change:
            obj.full_clean()
            # Only what the form changed: a full save would write back the status, closing and
            # drain fields as loaded, undoing a close-out that ran while the form was open.
            obj.save(update_fields=[*form.changed_data, "updated_at"])
            return
        # Through the service, which validates the window (the boards come with leaderboard's
        # SeasonBoardsMixin).
        season_create(
            season_id=obj.id,
            name=obj.name,
            starts_at=obj.starts_at,
            ends_at=obj.ends_at,
        )
        obj._state.adding = False


class ReadOnlyAdmin(admin.ModelAdmin):
    """Records staff look at but never add, edit or delete: final standings, grants (whose
    status alone is editable), the records of rebuilds and reconciles."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ClosedSeasonFrozenInline(admin.options.InlineModelAdmin):
    """An inline of the season page whose rows are what a closed season's standings, grants
    and history name (its boards, its reward tiers): none is added, changed or deleted once
    the season is closed."""

    def _editable(self, obj: Season | None) -> bool:
        return obj is None or obj.status != SeasonStatus.CLOSED

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._editable(obj) and super().has_add_permission(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._editable(obj) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._editable(obj) and super().has_delete_permission(request, obj)


class LargeTableAdmin(admin.ModelAdmin):
    """The list of a table that grows with play: no COUNT(*) of the table (neither Django's
    "N total" beside a filtered list nor the page's own count past ``exact_limit`` rows)."""

    paginator = EstimatedCountPaginator
    show_full_result_count = False
