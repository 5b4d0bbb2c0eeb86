"""Staff: webhook endpoints (secrets set and shown once) and the batches kept for them (see,
resend, purge)."""

from __future__ import annotations

import time
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from .events import EVENT_TYPES
from .models import WebhookDelivery, WebhookEndpoint
from .services import (
    webhook_boards_clean,
    webhook_deliveries_purge,
    webhook_deliveries_resend,
    webhook_endpoint_create,
    webhook_endpoint_secret_set,
    webhook_secret_clean,
    webhook_url_clean,
)


class WebhookEndpointForm(forms.ModelForm):
    url = forms.URLField(max_length=2000, assume_scheme="https")
    event_types = forms.MultipleChoiceField(
        choices=[(t, t) for t in EVENT_TYPES],
        widget=forms.CheckboxSelectMultiple,
        required=False,
        help_text="None ticked: every type.",
    )
    boards = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        help_text="One board per line as <season id>/<board slug> (e.g. 12/main); "
        "empty: every board.",
    )
    secret = forms.CharField(
        widget=forms.PasswordInput(render_value=False),
        required=False,
        strip=False,
        help_text="Stored encrypted and never shown again. Leave empty to generate one (shown "
        "once after saving) or, on an existing endpoint, to keep the current one.",
    )

    class Meta:
        model = WebhookEndpoint
        fields = ["name", "url", "event_types", "boards", "is_active"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.initial["boards"] = "\n".join(self.instance.boards)

    def clean_url(self) -> str:
        return webhook_url_clean(self.cleaned_data["url"])

    def clean_boards(self) -> list[str]:
        return webhook_boards_clean(self.cleaned_data["boards"].replace(",", "\n").splitlines())

    def clean_secret(self) -> str:
        secret: str = self.cleaned_data["secret"]
        return webhook_secret_clean(secret) if secret else ""


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    form = WebhookEndpointForm
    list_display = ("id", "name", "url", "types", "board_list", "is_active", "kept")
    list_filter = ("is_active",)
    search_fields = ("name", "url")
    readonly_fields = ("created_at", "updated_at")
    actions = ("new_secret",)

    def get_fields(self, request: HttpRequest, obj: WebhookEndpoint | None = None) -> list[Any]:
        fields = ["name", "url", "event_types", "boards", "is_active", "secret"]
        return fields if obj is None else [*fields, "created_at", "updated_at"]

    @admin.display(description="event types")
    def types(self, obj: WebhookEndpoint) -> str:
        return ", ".join(obj.event_types) or "all"

    @admin.display(description="boards")
    def board_list(self, obj: WebhookEndpoint) -> str:
        return ", ".join(obj.boards) or "all"

    @admin.display(description="kept batches")
    def kept(self, obj: WebhookEndpoint) -> str:
        url = reverse("admin:webhooks_webhookdelivery_changelist")
        return format_html('<a href="{}?endpoint__id__exact={}">see</a>', url, obj.pk)

    def save_model(
        self, request: HttpRequest, obj: WebhookEndpoint, form: Any, change: bool
    ) -> None:
        typed = form.cleaned_data.get("secret") or None
        if change:
            super().save_model(request, obj, form, change)
            if typed is not None:
                webhook_endpoint_secret_set(endpoint_id=obj.pk, secret=typed)
                messages.info(request, "The new secret is stored encrypted.")
            return
        try:
            endpoint, secret = webhook_endpoint_create(
                url=obj.url,
                secret=typed,
                event_types=obj.event_types,
                boards=obj.boards,
                name=obj.name,
                is_active=obj.is_active,
            )
        except ValidationError as exc:
            # The form checked every field already; only a race (a board deleted) lands here.
            messages.error(request, "; ".join(exc.messages))
            raise
        # The admin goes on with `obj` (change log, redirect): make it the created row.
        for name in ("id", "secret_encrypted", "created_at", "updated_at"):
            setattr(obj, name, getattr(endpoint, name))
        obj._state.adding = False
        if typed is None:
            _show_secret_once(request, endpoint, secret)

    # "change": a staff user who may only view endpoints must neither see nor post this action.
    @admin.action(
        description="Generate a new secret for the selected endpoints (shown once)",
        permissions=["change"],
    )
    def new_secret(self, request: HttpRequest, queryset: QuerySet[WebhookEndpoint]) -> None:
        for endpoint in queryset:
            _show_secret_once(
                request, endpoint, webhook_endpoint_secret_set(endpoint_id=endpoint.pk)
            )


def _show_secret_once(request: HttpRequest, endpoint: WebhookEndpoint, secret: str) -> None:
    messages.warning(
        request,
        f"Signing secret of {endpoint}: {secret} — copy it now into the receiver: it is "
        "stored encrypted and will not be shown again.",
    )


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = (
        "created_at",
        "endpoint",
        "status",
        "event_count",
        "attempts",
        "next_attempt_at",
        "give_up_at",
        "last_status",
        "error",
    )
    list_filter = ("status", "endpoint")
    list_select_related = ("endpoint",)
    search_fields = ("=id",)
    search_help_text = "A delivery id (X-Leaderboard-Delivery) or an event id."
    readonly_fields = [f.name for f in WebhookDelivery._meta.fields]
    actions = ("resend", "purge")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[WebhookDelivery], search_term: str
    ) -> tuple[QuerySet[WebhookDelivery], bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        by_event = queryset.filter(event_ids__contains=[term])
        try:
            return by_event | queryset.filter(id=term), False
        except ValidationError:  # not a UUID: only the event ids are searched
            return by_event, False

    @admin.display(description="last error")
    def error(self, obj: WebhookDelivery) -> str:
        return obj.last_error[:120]

    @admin.action(
        description="Resend the selected batches now (a fresh retry window)",
        permissions=["change"],
    )
    def resend(self, request: HttpRequest, queryset: QuerySet[WebhookDelivery]) -> None:
        count = webhook_deliveries_resend(
            delivery_ids=queryset.values_list("id", flat=True),
            now=time.time(),
            retry_hours=settings.WEBHOOK_RETRY_HOURS,
        )
        self.message_user(
            request,
            f"{count} batch(es) queued again; the deliverer sends them within "
            f"{settings.WEBHOOK_REFRESH_SECONDS:g} s.",
            messages.SUCCESS,
        )

    @admin.action(
        description="Purge the selected batches (their events are never sent)",
        permissions=["delete"],
    )
    def purge(self, request: HttpRequest, queryset: QuerySet[WebhookDelivery]) -> None:
        count = webhook_deliveries_purge(delivery_ids=queryset.values_list("id", flat=True))
        self.message_user(request, f"{count} batch(es) purged.", messages.SUCCESS)
