"""The profiles admin: list, search by id and by name, hide and unhide (thin: the services)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime

import pytest

from leaderboard.player_names import PlayerName, player_names_get
from players.models import PlayerProfile
from players.schema import ProfileUpdate
from players.services import player_profiles_upsert
from tests.leaderboard.test_redis_outage import free_port

pytestmark = pytest.mark.django_db(transaction=True)

URL = "/admin/players/playerprofile/"


@pytest.fixture
def profiles():
    at = datetime(2026, 1, 1, tzinfo=UTC)
    player_profiles_upsert(
        profiles=[
            ProfileUpdate(11, "Alice", "FR", None, at),
            ProfileUpdate(12, "alfred", None, None, at),
            ProfileUpdate(13, "Bob", "DE", None, at),
        ]
    )


def _listed(admin_client, query: str = "") -> list[int]:
    response = admin_client.get(URL + query)
    assert response.status_code == 200
    return [p.player_id for p in response.context["cl"].result_list]


def test_list_and_search_by_id_and_by_name(admin_client, profiles):
    assert _listed(admin_client) == [11, 12, 13]
    assert _listed(admin_client, "?q=13") == [13]
    assert _listed(admin_client, "?q=AL") == [11, 12]
    assert _listed(admin_client, "?q=" + "9" * 25) == []


def test_hide_and_unhide_actions(admin_client, admin_user, profiles):
    response = admin_client.post(
        URL, {"action": "hide_names", "_selected_action": ["11", "13"]}, follow=True
    )
    assert response.status_code == 200
    hidden = PlayerProfile.objects.get(player_id=11)
    assert (hidden.hidden, hidden.hidden_by_id) == (True, admin_user.id)
    assert player_names_get(player_ids=[11, 12, 13]) == {
        11: PlayerName(None, "FR"),
        12: PlayerName("alfred", None),
        13: PlayerName(None, "DE"),
    }
    admin_client.post(URL, {"action": "unhide_names", "_selected_action": ["11"]}, follow=True)
    assert player_names_get(player_ids=[11])[11] == PlayerName("Alice", "FR")


def test_a_hide_the_name_cache_cannot_take_changes_nothing_and_says_so(
    admin_client, profiles, settings
):
    reachable = copy.deepcopy(settings.CACHES)
    away, port = copy.deepcopy(reachable), free_port()  # Redis away: nothing listens there
    for alias in ("boards", "default"):
        away[alias]["LOCATION"] = f"redis://127.0.0.1:{port}/0"
    cluster_nodes = settings.REDIS_CLUSTER_NODES
    settings.CACHES, settings.REDIS_CLUSTER_NODES = away, [f"127.0.0.1:{port}"]
    response = admin_client.post(
        URL, {"action": "hide_names", "_selected_action": ["11"]}, follow=True
    )
    # Staff are told; PostgreSQL did not hide a name every board still shows.
    assert response.status_code == 200
    said = [str(m) for m in response.context["messages"]]
    assert any("left unchanged" in m and "11" in m for m in said), said
    assert not PlayerProfile.objects.get(player_id=11).hidden
    settings.CACHES, settings.REDIS_CLUSTER_NODES = reachable, cluster_nodes
    assert player_names_get(player_ids=[11])[11] == PlayerName("Alice", "FR")
    # Tried again with Redis back, it hides.
    admin_client.post(URL, {"action": "hide_names", "_selected_action": ["11"]}, follow=True)
    assert PlayerProfile.objects.get(player_id=11).hidden
    assert player_names_get(player_ids=[11])[11] == PlayerName(None, "FR")


def test_profiles_are_not_added_or_deleted_in_the_admin(admin_client, profiles):
    assert admin_client.get(URL + "add/").status_code == 403
    assert admin_client.get(URL + "11/delete/").status_code == 403
