"""Every custom admin action states the permission it needs: a staff user who may only view
neither sees nor can post an action that changes anything."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client, RequestFactory
from django.urls import reverse

from ingestion.models import GameServerToken
from ingestion.services import game_server_token_create
from seasons.models import Season, SeasonStatus
from tests.factories import SeasonFactory

pytestmark = pytest.mark.django_db

# The project's apps (their admins are what these tests hold to the rule).
APPS = {"ingestion", "seasons", "leaderboard", "closeout", "webhooks"}


@pytest.fixture
def viewer():
    """Staff, with every *view* permission of the project's apps and nothing else."""
    user = get_user_model().objects.create_user("viewer", "v@example.com", "pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(
            codename__startswith="view_",
            content_type__app_label__in=APPS,
        )
    )
    return user


@pytest.fixture
def viewer_client(client: Client, viewer) -> Client:
    client.force_login(viewer)
    return client


def _custom_actions(model_admin: admin.ModelAdmin) -> list:
    return [
        action
        for action in (model_admin.actions or [])
        if not (isinstance(action, str) and action == "delete_selected")
    ]


def test_every_custom_action_declares_its_permissions():
    undeclared = []
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label not in APPS:
            continue
        for action in _custom_actions(model_admin):
            func = getattr(model_admin, action) if isinstance(action, str) else action
            if not getattr(func, "allowed_permissions", ()):
                undeclared.append(f"{model.__name__}.{getattr(func, '__name__', func)}")
    assert undeclared == []


def test_a_view_only_user_is_offered_read_only_actions_only(viewer):
    request = RequestFactory().get("/admin/")
    request.user = viewer
    offered = {}
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label not in APPS:
            continue
        for name, choice in model_admin.get_actions(request).items():
            func = choice[0] if choice else None
            offered[f"{model.__name__}.{name}"] = tuple(getattr(func, "allowed_permissions", ()))
    # Only the CSV exports, which read.
    assert offered, "the viewer sees no changelist at all: the fixture is wrong"
    assert set(offered.values()) <= {("view",)}, offered


def test_a_view_only_user_cannot_post_the_deactivate_action(viewer_client):
    token, _ = game_server_token_create(name="eu-west-1")
    url = reverse("admin:ingestion_gameservertoken_changelist")

    listing = viewer_client.get(url)
    assert listing.status_code == 200
    assert "deactivate_tokens" not in listing.content.decode()

    response = viewer_client.post(
        url, {"action": "deactivate_tokens", ACTION_CHECKBOX_NAME: [token.id]}, follow=True
    )
    assert response.status_code in {200, 403}
    assert "deactivated" not in response.content.decode()
    assert GameServerToken.objects.get(id=token.id).is_active is True


@pytest.mark.parametrize("action", ["make_closing", "close_season"])
def test_a_view_only_user_cannot_post_a_season_action(viewer_client, drained_match_results, action):
    season = SeasonFactory.create(status=SeasonStatus.ACTIVE)
    response = viewer_client.post(
        reverse("admin:seasons_season_changelist"),
        {"action": action, ACTION_CHECKBOX_NAME: [season.id], "confirmed": "yes", "post": "yes"},
        follow=True,
    )
    assert response.status_code in {200, 403}
    assert Season.objects.get(id=season.id).status == SeasonStatus.ACTIVE
