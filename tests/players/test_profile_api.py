"""``PUT /api/players/{player}/profile`` (game-server token) and ``create_game_server_token``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from ingestion.models import GameServerToken
from ingestion.selectors import game_server_token_get
from ingestion.services import game_server_token_create, game_server_tokens_deactivate
from leaderboard.player_names import PlayerName, player_names_get
from players.models import PlayerProfile
from players.services import player_profile_hide

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def raw_token() -> str:
    return game_server_token_create(name="eu-west-1")[1]


def _client(raw_token: str | None) -> APIClient:
    client = APIClient()
    if raw_token is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_token}")
    return client


def _put(client: APIClient, player: object, body: object):
    return client.put(f"/api/players/{player}/profile", body, format="json")


def test_put_stores_and_answers_the_profile(raw_token):
    body = {
        "displayName": "Alice",
        "country": "FR",
        "avatarUrl": "https://cdn.example.com/a.png",
        "updatedAt": "2026-12-01T10:00:00+02:00",
    }
    response = _put(_client(raw_token), 42, body)
    assert response.status_code == 200, response.json()
    assert response.json() == {
        "playerId": 42,
        "displayName": "Alice",
        "country": "FR",
        "avatarUrl": "https://cdn.example.com/a.png",
        "updatedAt": "2026-12-01T08:00:00Z",
        "hidden": False,
    }
    assert player_names_get(player_ids=[42]) == {42: PlayerName("Alice", "FR")}

    # Older: accepted, changes nothing, answers what is stored.
    older = _put(
        _client(raw_token), 42, {**body, "displayName": "Old", "updatedAt": "2026-01-01T00:00:00Z"}
    )
    assert older.status_code == 200
    assert older.json()["displayName"] == "Alice"


def test_put_without_updated_at_means_now(raw_token):
    before = datetime.now(UTC)
    response = _put(_client(raw_token), 7, {"displayName": "Bob"})
    assert response.status_code == 200, response.json()
    stored = PlayerProfile.objects.get(player_id=7)
    assert before - timedelta(seconds=1) <= stored.profile_updated_at <= datetime.now(UTC)
    assert (stored.country, stored.avatar_url) == (None, None)


def test_put_keeps_a_hidden_name_hidden(raw_token):
    _put(_client(raw_token), 9, {"displayName": "Rude"})
    player_profile_hide(player_id=9)
    response = _put(_client(raw_token), 9, {"displayName": "Still rude"})
    assert response.json()["hidden"] is True
    # The answer shows the name as every read does: null while hidden.
    assert response.json()["displayName"] is None
    assert player_names_get(player_ids=[9]) == {9: PlayerName(None, None)}


@pytest.mark.parametrize(
    ("player", "body", "code", "field"),
    [
        (42, {"displayName": ""}, "invalid_display_name", "displayName"),
        (42, {"displayName": "A", "country": "XX"}, "invalid_country", "country"),
        (42, {"displayName": "A", "avatarUrl": "ftp://x"}, "invalid_avatar_url", "avatarUrl"),
        (42, {"displayName": "A", "updatedAt": "yesterday"}, "invalid_value", "updatedAt"),
        (
            42,
            {"displayName": "A", "updatedAt": "9999-12-31T23:59:59Z"},
            "invalid_value",
            "updatedAt",
        ),
        (42, {"displayName": "A", "playerId": 43}, "invalid_value", "playerId"),
        (42, {"country": "FR"}, "missing_field", "displayName"),
        (42, ["A"], "not_object", None),
        ("abc", {"displayName": "A"}, "invalid_value", None),
        ("0", {"displayName": "A"}, "invalid_value", None),
        ("9" * 30, {"displayName": "A"}, "invalid_value", None),
        # Past the 4,300 digits int() takes: the length is checked first (it was a 500).
        ("9" * 5000, {"displayName": "A"}, "invalid_value", None),
    ],
)
def test_put_bad_input_is_a_400_with_its_reason(raw_token, player, body, code, field):
    response = _put(_client(raw_token), player, body)
    assert response.status_code == 400
    answer = response.json()
    assert (answer["code"], answer["field"]) == (code, field)
    assert answer["detail"]
    assert not PlayerProfile.objects.exists()


def test_put_not_json_is_a_400(raw_token):
    response = _client(raw_token).put(
        "/api/players/1/profile", b"{nope", content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json()["code"] == "not_json"


def test_put_too_large_or_not_json_content_is_413_or_415_as_the_schema_says(
    raw_token, settings, client
):
    settings.INGEST_HTTP_MAX_BODY_BYTES = 200
    too_big = _put(_client(raw_token), 1, {"displayName": "A", "avatarUrl": "x" * 300})
    assert too_big.status_code == 413
    assert "200 bytes" in too_big.json()["detail"]
    form = _client(raw_token).put(
        "/api/players/1/profile", "displayName=A", content_type="application/x-www-form-urlencoded"
    )
    assert form.status_code == 415
    assert form.json()["detail"]
    assert not PlayerProfile.objects.exists()

    schema = client.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    responses = schema["paths"]["/api/players/{player}/profile"]["put"]["responses"]
    assert {"413", "415"} <= set(responses)
    assert all("content" in responses[code] for code in ("413", "415"))


def test_put_needs_an_active_game_server_token(raw_token):
    assert _put(_client(None), 1, {"displayName": "A"}).status_code == 401
    assert _put(_client("lbgs_unknown"), 1, {"displayName": "A"}).status_code == 401
    token = game_server_token_get(raw_token=raw_token)
    assert token is not None
    game_server_tokens_deactivate(token_ids=[token.id])
    assert _put(_client(raw_token), 1, {"displayName": "A"}).status_code == 403
    assert not PlayerProfile.objects.exists()


def test_create_game_server_token_prints_the_token_alone_on_the_last_line():
    out = StringIO()
    call_command("create_game_server_token", "--name", "ci-server", stdout=out)
    lines = out.getvalue().splitlines()
    token = lines[-1]
    assert token.startswith("lbgs_")
    assert token == token.strip()
    assert out.getvalue().count(token) == 1  # shown once
    stored = game_server_token_get(raw_token=token)
    assert stored is not None
    assert stored.name == "ci-server"
    assert token not in {t.token_digest for t in GameServerToken.objects.all()}
    # The token works on the door.
    assert _put(_client(token), 5, {"displayName": "Eve"}).status_code == 200
    with pytest.raises(CommandError, match="already exists"):
        call_command("create_game_server_token", "--name", "ci-server", stdout=StringIO())
