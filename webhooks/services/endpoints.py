"""Webhook endpoints: registered, changed, their secret set (shown once, stored encrypted)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction

from leaderboard.models import Board

from ..crypto import secret_encrypt, secret_generate
from ..events import EVENT_TYPES
from ..models import WebhookEndpoint
from ..targets import TargetRefused, target_url_check

SECRET_MIN_LENGTH = 16
_BOARD_LABEL = re.compile(r"(\d+)/([a-z0-9-]{1,32})")


def webhook_url_clean(url: str) -> str:
    url = url.strip()
    try:
        target_url_check(url, allow_private=settings.WEBHOOK_ALLOW_PRIVATE)
    except TargetRefused as exc:
        raise ValidationError(f"url: {exc}") from None
    return url


def webhook_event_types_clean(types: Iterable[str]) -> list[str]:
    cleaned = sorted({t.strip() for t in types if t.strip()})
    unknown = [t for t in cleaned if t not in EVENT_TYPES]
    if unknown:
        raise ValidationError(
            f"unknown event type(s) {', '.join(unknown)}; use {', '.join(EVENT_TYPES)}"
        )
    return cleaned


def webhook_boards_clean(boards: Iterable[str]) -> list[str]:
    """``<season>/<slug>`` labels of existing boards, each once."""
    cleaned = sorted({b.strip() for b in boards if b.strip()})
    for label in cleaned:
        match = _BOARD_LABEL.fullmatch(label)
        if match is None:
            raise ValidationError(f"board {label!r}: use <season id>/<board slug>, e.g. 12/main")
        season_id, slug = int(match.group(1)), match.group(2)
        if not Board.objects.filter(season_id=season_id, slug=slug).exists():
            raise ValidationError(f"board {label!r}: season {season_id} has no board {slug!r}")
    return cleaned


def webhook_secret_clean(secret: str) -> str:
    if len(secret) < SECRET_MIN_LENGTH:
        raise ValidationError(f"the secret must have at least {SECRET_MIN_LENGTH} characters")
    if secret != secret.strip() or any(ord(c) < 0x20 for c in secret):
        raise ValidationError("the secret must not have surrounding spaces or control characters")
    return secret


@transaction.atomic
def webhook_endpoint_create(
    *,
    url: str,
    secret: str | None = None,
    event_types: Iterable[str] = (),
    boards: Iterable[str] = (),
    name: str = "",
    is_active: bool = True,
) -> tuple[WebhookEndpoint, str]:
    """Register an endpoint; returns it and its secret (``secret``, or a generated one when
    None), which is stored only encrypted: the caller shows it once."""
    raw_secret = secret_generate() if secret is None else webhook_secret_clean(secret)
    endpoint = WebhookEndpoint(
        name=name.strip(),
        url=webhook_url_clean(url),
        secret_encrypted=secret_encrypt(raw_secret),
        event_types=webhook_event_types_clean(event_types),
        boards=webhook_boards_clean(boards),
        is_active=is_active,
    )
    endpoint.full_clean()
    endpoint.save(force_insert=True)
    return endpoint, raw_secret


def webhook_endpoint_secret_set(*, endpoint_id: int, secret: str | None = None) -> str:
    """Replace an endpoint's secret (a generated one when None); returns it, to show once.
    The deliverer signs with it from its next reload of the endpoints on."""
    raw_secret = secret_generate() if secret is None else webhook_secret_clean(secret)
    updated = WebhookEndpoint.objects.filter(id=endpoint_id).update(
        secret_encrypted=secret_encrypt(raw_secret)
    )
    if not updated:
        raise ValidationError(f"no webhook endpoint {endpoint_id}")
    return raw_secret


def webhook_endpoint_url_set(*, endpoint_id: int, url: str) -> None:
    WebhookEndpoint.objects.filter(id=endpoint_id).update(url=webhook_url_clean(url))
