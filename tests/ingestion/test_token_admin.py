from __future__ import annotations

import hashlib
import re

import pytest
from django.urls import reverse

from ingestion.models import GameServerToken
from ingestion.services import game_server_token_create

pytestmark = pytest.mark.django_db

TOKEN = re.compile(r"lbgs_[A-Za-z0-9_\-]{40,}")


def test_creating_a_token_shows_it_once(admin_client) -> None:
    created = admin_client.post(
        reverse("admin:ingestion_gameservertoken_add"), {"name": "eu-west-1"}
    )
    # The message that shows the token waits server-side (the session), never in a cookie:
    # Django's default stores it in a signed, unencrypted cookie that proxies may log.
    assert "messages" not in created.cookies
    response = admin_client.get(created["Location"])
    assert response.status_code == 200
    shown = TOKEN.findall(response.content.decode())
    assert len(set(shown)) == 1
    raw_token = shown[0]

    token = GameServerToken.objects.get(name="eu-west-1")
    assert token.is_active
    assert token.token_digest == hashlib.sha256(raw_token.encode()).hexdigest()
    assert raw_token.startswith(token.token_prefix)
    assert raw_token not in token.token_digest

    # Never again: not on the list, not on the change page.
    listing = admin_client.get(reverse("admin:ingestion_gameservertoken_changelist"))
    change = admin_client.get(reverse("admin:ingestion_gameservertoken_change", args=[token.id]))
    for page in (listing, change):
        assert page.status_code == 200
        assert raw_token not in page.content.decode()
    assert token.token_prefix in listing.content.decode()


def test_the_deactivate_action(admin_client) -> None:
    keep, _ = game_server_token_create(name="keep")
    retire, _ = game_server_token_create(name="retire")
    response = admin_client.post(
        reverse("admin:ingestion_gameservertoken_changelist"),
        {"action": "deactivate_tokens", "_selected_action": [retire.id]},
        follow=True,
    )
    assert response.status_code == 200
    assert "1 token(s) deactivated" in response.content.decode()
    assert GameServerToken.objects.get(id=retire.id).is_active is False
    assert GameServerToken.objects.get(id=keep.id).is_active is True
