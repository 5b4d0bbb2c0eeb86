from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from kafka.errors import TopicAuthorizationFailedError
from rest_framework.test import APIClient

from ingestion.models import GameServerToken
from ingestion.services import door, game_server_token_create, game_server_tokens_deactivate
from seasons.models import SeasonStatus
from tests.factories import SEASON_START, SeasonFactory

from .topic_reader import topic_read, topic_size

URL = "/api/match-results"

pytestmark = pytest.mark.django_db


@pytest.fixture
def raw_token() -> str:
    return game_server_token_create(name="eu-west-1")[1]


def client_with(raw_token: str | None = None, *, header: str | None = None) -> APIClient:
    client = APIClient()
    if header is not None:
        client.credentials(HTTP_AUTHORIZATION=header)
    elif raw_token is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_token}")
    return client


def result(player_id: object = 42, **overrides) -> dict:
    body = {
        "matchId": str(uuid.uuid4()),
        "playerId": player_id,
        "seasonId": 12,
        "points": 1518,
        "achievedAt": (SEASON_START + timedelta(days=11, hours=10)).isoformat(),
    }
    body.update(overrides)
    return body


def test_one_result_is_published_and_answered_202(
    door_topic, door_season, raw_token, kafka_bootstrap
):
    sent = result(42)
    response = client_with(raw_token).post(URL, sent, format="json")
    assert response.status_code == 202, response.content
    assert response.json() == {"accepted": 1}

    (record,) = topic_read(door_topic, kafka_bootstrap, count=1)
    assert record.key == b"42"
    assert json.loads(record.value) == {**sent, "achievedAt": "2026-10-12T10:00:00Z"}
    token = GameServerToken.objects.get(name="eu-west-1")
    assert token.last_used_at is not None


def test_metadata_is_published_as_sent(door_topic, door_season, raw_token, kafka_bootstrap):
    sent = result(42, metadata={"car": "Ember RS", "laps": [81.5, 80.25], "replay": None})
    response = client_with(raw_token).post(URL, sent, format="json")
    assert response.status_code == 202, response.content

    (record,) = topic_read(door_topic, kafka_bootstrap, count=1)
    assert json.loads(record.value)["metadata"] == sent["metadata"]


def test_a_list_is_published_whole(door_topic, door_season, raw_token, kafka_bootstrap):
    sent = [result(player_id) for player_id in range(1, 251)]
    response = client_with(raw_token).post(URL, sent, format="json")
    assert response.status_code == 202, response.content
    assert response.json() == {"accepted": 250}

    records = topic_read(door_topic, kafka_bootstrap, count=250)
    assert sorted(json.loads(r.value)["matchId"] for r in records) == sorted(
        item["matchId"] for item in sent
    )


BAD_ITEMS = [
    ("not an object", [1, 2], "not_object", None),
    ("missing field", {"playerId": 1}, "missing_field", "matchId"),
    ("mistyped points", result(points="12"), "wrong_type", "points"),
    ("float player", result(player_id=1.0), "wrong_type", "playerId"),
    ("negative points", result(points=-1), "invalid_value", "points"),
    ("points beyond the codec", result(points=1 << 31), "points_too_large", "points"),
    ("bad uuid", result(matchId="nope"), "invalid_value", "matchId"),
    ("no offset", result(achievedAt="2026-10-12T10:15:00"), "invalid_value", "achievedAt"),
    ("unknown season", result(seasonId=999), "unknown_season", "seasonId"),
    (
        "before the season",
        result(achievedAt=(SEASON_START - timedelta(seconds=1)).isoformat()),
        "outside_season",
        "achievedAt",
    ),
    ("metadata not an object", result(metadata=["car"]), "invalid_metadata", "metadata"),
    ("metadata too large", result(metadata={"a": "é" * 253}), "metadata_too_large", "metadata"),
]


@pytest.mark.parametrize(
    ("bad", "code", "field"), [case[1:] for case in BAD_ITEMS], ids=[c[0] for c in BAD_ITEMS]
)
def test_any_bad_item_rejects_the_whole_request(
    door_topic, door_season, raw_token, kafka_bootstrap, bad, code, field
):
    body = [result(1), bad, result(2)]
    response = client_with(raw_token).post(URL, body, format="json")
    assert response.status_code == 400, response.content
    payload = response.json()
    assert len(payload["invalid"]) == 1
    (item,) = payload["invalid"]
    assert (item["index"], item["code"], item["field"]) == (1, code, field)
    assert item["reason"]
    # All or nothing: the good items around it were not published either.
    assert topic_size(door_topic, kafka_bootstrap) == 0


def test_a_name_that_is_not_text_is_quoted_escaped_in_a_json_400(
    door_topic, door_season, raw_token, kafka_bootstrap
):
    # "\ud800" is valid JSON, not text: the reason that names it must still render.
    raw = json.dumps(result(tiebreakers={"\ud800": "x"})).encode()
    assert b"\\ud800" in raw
    response = client_with(raw_token).post(URL, raw, content_type="application/json")
    assert response.status_code == 400, response.content
    (item,) = response.json()["invalid"]
    assert item["code"] == "invalid_tiebreakers"
    assert item["reason"] == "tiebreakers.\\ud800 must be an integer, got a string"
    assert topic_size(door_topic, kafka_bootstrap) == 0


def test_every_bad_item_is_listed_with_its_index(door_topic, door_season, raw_token):
    body = [result(1), result(points=-5), result(2), result(seasonId=77)]
    response = client_with(raw_token).post(URL, body, format="json")
    assert response.status_code == 400
    assert [(i["index"], i["code"]) for i in response.json()["invalid"]] == [
        (1, "invalid_value"),
        (3, "unknown_season"),
    ]


def test_a_closing_season_takes_results_of_its_window_only(door_topic, raw_token, kafka_bootstrap):
    # A game server posting a result achieved before the end, after the switch to closing.
    # The season ended a minute ago, as a closing season has (a result after now is refused).
    now = timezone.now().replace(microsecond=0)
    season = SeasonFactory.create(
        id=12,
        status=SeasonStatus.CLOSING,
        starts_at=now - timedelta(days=30),
        ends_at=now - timedelta(minutes=1),
    )
    response = client_with(raw_token).post(
        URL, result(7, achievedAt=season.ends_at.isoformat()), format="json"
    )
    assert response.status_code == 202, response.content
    assert len(topic_read(door_topic, kafka_bootstrap, count=1)) == 1
    late = result(8, achievedAt=(season.ends_at + timedelta(seconds=1)).isoformat())
    response = client_with(raw_token).post(URL, late, format="json")
    assert response.status_code == 400
    assert response.json()["invalid"][0]["code"] == "outside_season"


def test_a_closed_season_takes_nothing(door_topic, raw_token):
    SeasonFactory(id=12, status=SeasonStatus.CLOSED)
    response = client_with(raw_token).post(URL, result(), format="json")
    assert response.status_code == 400
    assert response.json()["invalid"][0]["code"] == "season_closed"


@pytest.mark.parametrize("body", [[], "text", [result() for _ in range(1001)]])
def test_empty_or_oversized_bodies_are_400(door_topic, door_season, raw_token, body):
    response = client_with(raw_token).post(URL, body, format="json")
    assert response.status_code == 400
    assert "detail" in response.json()


def test_no_token_is_401_with_a_challenge(door_topic, door_season):
    response = client_with().post(URL, result(), format="json")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    "header", ["Bearer", "Token abc", "Bearer a b", "Basic dXNlcjpwYXNz", "Bearer lbgs_unknown"]
)
def test_malformed_or_unknown_credentials_are_401(door_topic, door_season, raw_token, header):
    response = client_with(header=header).post(URL, result(), format="json")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_a_deactivated_token_is_403_and_publishes_nothing(door_topic, door_season, kafka_bootstrap):
    token, raw_token = game_server_token_create(name="retired")
    assert game_server_tokens_deactivate(token_ids=[token.id]) == 1
    response = client_with(raw_token).post(URL, result(), format="json")
    assert response.status_code == 403
    assert topic_size(door_topic, kafka_bootstrap) == 0


def test_kafka_unreachable_is_503_with_retry_after(settings, door_season, raw_token):
    # Nothing listens on port 9 (discard); the door must answer, not hang or 500.
    settings.KAFKA_BOOTSTRAP_SERVERS = ["127.0.0.1:9"]
    response = client_with(raw_token).post(URL, result(), format="json")
    assert response.status_code == 503
    assert int(response["Retry-After"]) > 0
    assert "retry" in response.json()["detail"]


def test_a_producer_failed_for_good_is_replaced_by_the_next_request(
    door_topic, door_season, raw_token, kafka_bootstrap, monkeypatch
):
    """kafka-python's idempotent producer stays failed after an error it cannot retry (an
    authorization failure while an ACL was wrong): the door builds a fresh one for the next
    request instead of answering 503 until the process restarts."""
    failed = door._http_producer()

    def authorization_failed(*args, **kwargs):
        raise TopicAuthorizationFailedError("the ACL was wrong for a moment")

    monkeypatch.setattr(failed, "send_many", authorization_failed)
    assert client_with(raw_token).post(URL, result(41), format="json").status_code == 503
    response = client_with(raw_token).post(URL, result(42), format="json")
    assert response.status_code == 202, response.content
    assert door._http_producer() is not failed
    (record,) = topic_read(door_topic, kafka_bootstrap, count=1)
    assert record.key == b"42"


def test_the_door_is_in_the_openapi_schema_with_its_bearer_scheme(client):
    response = client.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    schema = json.loads(response.content)
    operation = schema["paths"]["/api/match-results"]["post"]
    assert {"202", "400", "401", "403", "503"} <= set(operation["responses"])
    assert operation["security"] == [{"gameServerToken": []}]
    assert schema["components"]["securitySchemes"]["gameServerToken"]["scheme"] == "bearer"


def test_tiebreakers_are_checked_against_the_board_and_published_as_sent(
    door_topic, door_season, raw_token, kafka_bootstrap
):
    from leaderboard.models import TiebreakColumn
    from tests.factories import board_factory

    columns = (TiebreakColumn("kills", "desc"), TiebreakColumn("deaths", "asc"))
    board_factory(door_season, "arena", tiebreaks=columns)
    sent = result(42, board="arena", points=2**31 - 1, tiebreakers={"kills": 3, "deaths": 0})
    response = client_with(raw_token).post(URL, sent, format="json")
    assert response.status_code == 202, response.content
    (record,) = topic_read(door_topic, kafka_bootstrap, count=1)
    assert json.loads(record.value)["tiebreakers"] == {"kills": 3, "deaths": 0}

    missing = client_with(raw_token).post(
        URL, result(43, board="arena", tiebreakers={"kills": 3}), format="json"
    )
    assert missing.status_code == 400
    assert missing.json()["invalid"][0]["code"] == "invalid_tiebreakers"
    assert topic_size(door_topic, kafka_bootstrap) == 1
