"""``POST /api/seasons/{s}/boards/{b}/players/{p}/join`` (game-server token): every status and
code the contract names, and the OpenAPI schema that documents them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from rest_framework.test import APIClient

from ingestion.services import game_server_token_create, game_server_tokens_deactivate
from leaderboard.models import Board, Participant
from seasons.models import SeasonStatus
from tests.factories import board_factory
from tests.helpers import make_live_season

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def token() -> tuple[int, str]:
    created, raw = game_server_token_create(name="eu-west-1")
    return created.id, raw


def _client(raw: str | None) -> APIClient:
    client = APIClient()
    if raw is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def _join(client: APIClient, season: object, board: object, player: object):
    return client.post(f"/api/seasons/{season}/boards/{board}/players/{player}/join")


def test_join_answers_201_then_200_then_409_board_full(token) -> None:
    season = make_live_season()
    board_factory(season, "cup", join_required=True, max_size=2, max_attempts=3)
    client = _client(token[1])
    first = _join(client, season.id, "cup", 42)
    assert first.status_code == 201, first.json()
    body = first.json()
    assert body.pop("joinedAt")
    assert body == {
        "seasonId": season.id,
        "board": "cup",
        "playerId": 42,
        "joined": True,
        "participants": 1,
        "maxSize": 2,
    }
    again = _join(client, season.id, "cup", 42)
    assert again.status_code == 200
    assert again.json()["joined"] is False
    assert again.json()["participants"] == 1
    assert _join(client, season.id, "cup", 43).status_code == 201
    full = _join(client, season.id, "cup", 44)
    assert full.status_code == 409
    assert full.json()["code"] == "board_full"
    assert "full: 2 of 2 joined" in full.json()["detail"]
    assert set(
        Participant.objects.filter(board__slug="cup", board__season=season).values_list(
            "player_id", flat=True
        )
    ) == {42, 43}


def test_join_refuses_a_board_without_joining_and_an_ended_season(token) -> None:
    season = make_live_season()
    board_factory(season, "cup", join_required=True)
    client = _client(token[1])
    open_board = _join(client, season.id, "main", 1)
    assert open_board.status_code == 409
    assert open_board.json()["code"] == "join_not_required"
    season.status = SeasonStatus.CLOSING
    season.save(update_fields=["status"])
    ended = _join(client, season.id, "cup", 1)
    assert ended.status_code == 409
    assert ended.json()["code"] == "season_ended"
    past = make_live_season(id=season.id + 1)
    past.ends_at = past.starts_at + timedelta(days=1)
    past.save(update_fields=["ends_at"])
    board_factory(past, "cup", join_required=True)
    assert _join(client, past.id, "cup", 1).json()["code"] == "season_ended"


def test_join_answers_404_400_401_and_403(token) -> None:
    season = make_live_season()
    board_factory(season, "cup", join_required=True)
    client = _client(token[1])
    unknown_season = _join(client, 999_999, "cup", 1)
    assert unknown_season.status_code == 404
    assert unknown_season.json()["detail"] == "season 999999 does not exist"
    unknown_board = _join(client, season.id, "nope", 1)
    assert unknown_board.status_code == 404
    assert unknown_board.json()["detail"] == f"season {season.id} has no board 'nope'"
    huge = "9" * 5000  # past the 4,300 digits int() takes: it was a 500
    for season_part, player_part in [
        (season.id, "x"),
        ("0", 1),
        (season.id, "1.0"),
        (season.id, huge),
    ]:
        bad = _join(client, season_part, "cup", player_part)
        assert bad.status_code == 400
        assert bad.json()["code"] == "invalid_value"
    assert _join(_client(None), season.id, "cup", 1).status_code == 401
    assert _join(_client("lbgs_not-a-token"), season.id, "cup", 1).status_code == 401
    game_server_tokens_deactivate(token_ids=[token[0]])
    assert _join(client, season.id, "cup", 1).status_code == 403
    assert not Participant.objects.exists()
    assert Board.objects.get(season=season, slug="cup").participants == 0


def test_the_schema_documents_the_join(client) -> None:
    schema = client.get("/api/schema", HTTP_ACCEPT="application/json").json()
    operation = schema["paths"]["/api/seasons/{season}/boards/{board}/players/{player}/join"][
        "post"
    ]
    assert operation["operationId"] == "board_player_join"
    assert {"201", "200", "400", "401", "403", "404", "409"} <= set(operation["responses"])
    assert operation["security"]
