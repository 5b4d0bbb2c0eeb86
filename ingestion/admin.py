from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from .models import GameServerToken
from .services import game_server_token_create, game_server_tokens_deactivate


@admin.register(GameServerToken)
class GameServerTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "token_prefix", "is_active", "created_at", "last_used_at")
    list_filter = ("is_active",)
    search_fields = ("name", "token_prefix")
    readonly_fields = ("token_prefix", "created_at", "last_used_at")
    actions = ("deactivate_tokens",)

    def get_fields(self, request: HttpRequest, obj: GameServerToken | None = None) -> list[Any]:
        if obj is None:
            # The token itself is generated, never typed in.
            return ["name"]
        return ["name", "is_active", "token_prefix", "created_at", "last_used_at"]

    def save_model(
        self, request: HttpRequest, obj: GameServerToken, form: Any, change: bool
    ) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        token, raw_token = game_server_token_create(name=obj.name)
        # The admin goes on with `obj` (change log, redirect): make it the created row.
        for field in ("id", "token_prefix", "token_digest", "is_active", "created_at"):
            setattr(obj, field, getattr(token, field))
        obj._state.adding = False
        messages.warning(
            request,
            f"Token for {token.name}: {raw_token} — copy it now into the game server's "
            "configuration: it is stored only as a digest and will not be shown again.",
        )

    # "change": a staff user who may only view tokens must neither see nor post this action.
    @admin.action(
        description="Deactivate the selected tokens (their servers get 403)", permissions=["change"]
    )
    def deactivate_tokens(self, request: HttpRequest, queryset: QuerySet[GameServerToken]) -> None:
        count = game_server_tokens_deactivate(token_ids=queryset.values_list("id", flat=True))
        self.message_user(request, f"{count} token(s) deactivated.", messages.SUCCESS)
