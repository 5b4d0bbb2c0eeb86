"""Game-server tokens: the credentials of the HTTP door (created, deactivated, touched)."""

from __future__ import annotations

import secrets
from collections.abc import Iterable

from django.db import transaction
from django.utils import timezone

from ..models import GameServerToken
from ..selectors import game_server_token_digest

GAME_SERVER_TOKEN_MARKER = "lbgs_"  # noqa: S105 -- a recognisable prefix, not a secret
# How stale last_used_at may get: writing it on every request would add a row update per post.
GAME_SERVER_TOKEN_TOUCH_SECONDS = 60


@transaction.atomic
def game_server_token_create(*, name: str) -> tuple[GameServerToken, str]:
    """Create a token for a game server; the raw token is returned once and never stored."""
    raw_token = GAME_SERVER_TOKEN_MARKER + secrets.token_urlsafe(32)
    token = GameServerToken(
        name=name,
        token_prefix=raw_token[: GameServerToken._meta.get_field("token_prefix").max_length],
        token_digest=game_server_token_digest(raw_token=raw_token),
    )
    token.full_clean()
    token.save(force_insert=True)
    return token, raw_token


def game_server_tokens_deactivate(*, token_ids: Iterable[int]) -> int:
    return GameServerToken.objects.filter(id__in=list(token_ids), is_active=True).update(
        is_active=False
    )


def game_server_token_touch(*, token: GameServerToken) -> None:
    """Record a use, at most once a minute per token."""
    now = timezone.now()
    last = token.last_used_at
    if last is not None and (now - last).total_seconds() < GAME_SERVER_TOKEN_TOUCH_SECONDS:
        return
    GameServerToken.objects.filter(id=token.id).update(last_used_at=now)
    token.last_used_at = now
