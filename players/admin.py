"""Staff view of player profiles: search by id or name, hide and unhide names.

The actions call the services (players/services.py), which write the name cache inside their
transaction (players.signals): a hidden name reads null everywhere right away, and one the
cache could not take stays as it was, named to staff to try again. Profiles are written
by game servers only: staff can view them and hide or unhide the name, not edit them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from .models import PlayerProfile
from .services import player_profile_hide, player_profile_unhide

logger = logging.getLogger(__name__)


class PlayerProfileAdminBase(admin.ModelAdmin):
    """Registered by leaderboard_project/admin.py with the seasons app's paginator for tables
    of millions of rows (one profile per player), which this app cannot import."""

    list_display = (
        "player_id",
        "display_name",
        "country",
        "hidden",
        "name_updated_at",
        "updated_at",
        "hidden_at",
        "hidden_by",
    )
    list_filter = ("hidden",)
    # "=": an exact player id; "^": a case-insensitive prefix of the name (served by an index).
    search_fields = ("=player_id", "^display_name")
    search_help_text = "A player id, or the start of a display name."
    ordering = ("player_id",)
    show_full_result_count = False
    list_select_related = ("hidden_by",)
    actions = ("hide_names", "unhide_names")
    readonly_fields = [f.name for f in PlayerProfile._meta.fields]

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[PlayerProfile], search_term: str
    ) -> tuple[QuerySet[PlayerProfile], bool]:
        # A name is not a player id: "=player_id" must not turn "Alice" into a database error.
        term = search_term.strip()
        if term and not term.isdigit():
            return queryset.filter(display_name__istartswith=term), False
        if term.isdigit() and len(term) > 19:
            return queryset.none(), False
        return super().get_search_results(request, queryset, search_term)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.action(description="Hide the selected names (null everywhere)", permissions=["change"])
    def hide_names(self, request: HttpRequest, queryset: QuerySet[PlayerProfile]) -> None:
        user = request.user if request.user.is_authenticated else None
        self._each(
            request,
            queryset,
            lambda player_id: player_profile_hide(player_id=player_id, by=user),
            done="hidden",
        )

    @admin.action(description="Unhide the selected names", permissions=["change"])
    def unhide_names(self, request: HttpRequest, queryset: QuerySet[PlayerProfile]) -> None:
        self._each(
            request,
            queryset,
            lambda player_id: player_profile_unhide(player_id=player_id),
            done="shown again",
        )

    def _each(
        self,
        request: HttpRequest,
        queryset: QuerySet[PlayerProfile],
        change: Callable[[int], bool],
        *,
        done: str,
    ) -> None:
        """Each selected profile in its own transaction; one the name cache could not take
        (Redis away) is left as it was, and staff are told which to try again."""
        changed, failed = 0, []
        for player_id in queryset.values_list("player_id", flat=True):
            try:
                change(player_id)
                changed += 1
            except Exception:
                logger.exception("player %s: the name cache could not be written", player_id)
                failed.append(player_id)
        if changed:
            self.message_user(request, f"{changed} name(s) {done}.", messages.SUCCESS)
        if failed:
            self.message_user(
                request,
                f"{len(failed)} name(s) left unchanged, the name cache being unreachable; try "
                f"again: {', '.join(map(str, failed[:20]))}{' ...' if len(failed) > 20 else ''}",
                messages.ERROR,
            )
