"""The HTTP door's bodies: capped in size (413 before parsing) and in nesting (400), never a 500."""

from __future__ import annotations

import io
import json
import uuid
from datetime import timedelta
from typing import IO, Any, cast

import pytest
from rest_framework.exceptions import ParseError
from rest_framework.test import APIClient

from ingestion.parsers import BoundedJSONParser, RequestBodyTooLarge
from ingestion.services import game_server_token_create
from tests.factories import SEASON_START

from .topic_reader import topic_size

URL = "/api/match-results"

pytestmark = pytest.mark.django_db


@pytest.fixture
def door(door_season) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {game_server_token_create(name='eu')[1]}")
    return client


def result(**extra) -> dict:
    return {
        "matchId": str(uuid.uuid4()),
        "playerId": 42,
        "seasonId": 12,
        "points": 1518,
        "achievedAt": (SEASON_START + timedelta(days=11)).isoformat(),
        **extra,
    }


def post_raw(client: APIClient, body: bytes, **extra):
    data = cast(Any, body)  # bytes go through as they are; the stubs only say str
    return client.generic("POST", URL, data, content_type="application/json", **extra)


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 5000,  # was a RecursionError: 500
        b"[" * 1000 + b"]" * 1000,  # parses, then re-encoding recursed: 500
        json.dumps(
            [result(extra={"a": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]})]
        ).encode(),
        b'[{"a": ' * 3000 + b"1" + b"}]" * 3000,
        # orjson refuses the 2^70, Python's json takes it, then meets the nesting.
        b"[" * 10 + b"1180591620717411303424," + b"[" * 3000,
    ],
)
def test_deeply_nested_json_is_400_with_a_reason(door_topic, door, kafka_bootstrap, body):
    response = post_raw(door, body)
    assert response.status_code == 400, response.content
    payload = response.json()
    assert "nested deeper than" in payload["detail"]
    assert payload["invalid"] == []
    assert topic_size(door_topic, kafka_bootstrap) == 0


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"{", "not valid JSON"),
        (b'[{"a": NaN}]', "NaN"),
        (b"\xff\xfe[]", "not UTF-8"),
        (b"", None),  # empty: no body at all, the items' check speaks
    ],
)
def test_malformed_json_is_400_in_the_door_shape(door_topic, door, body, reason):
    response = post_raw(door, body)
    assert response.status_code == 400, response.content
    payload = response.json()
    assert set(payload) == {"detail", "invalid"}
    if reason:
        assert reason in payload["detail"]


@pytest.mark.parametrize(
    ("literal", "reason"),
    [
        # orjson reads it as the float 1e+30; the reason said "got float 1e+30".
        ("1" + "0" * 30, "points is out of range: 1" + "0" * 30 + " is larger than the maximum"),
        ("9" * 5000, "points is out of range: an integer of 5000 digits is larger than"),
        ("1e30", "points must be an integer, got float 1e+30"),
    ],
)
def test_an_integer_out_of_range_is_named_as_such_at_the_door(
    door_topic, door, kafka_bootstrap, literal, reason
):
    fields = {key: json.dumps(value) for key, value in result().items()} | {"points": literal}
    item = "{" + ",".join(f'"{key}":{value}' for key, value in fields.items()) + "}"
    response = post_raw(door, f"[{item}]".encode())
    assert response.status_code == 400, response.content
    [invalid] = response.json()["invalid"]
    assert invalid["index"] == 0
    assert invalid["field"] == "points"
    assert invalid["reason"].startswith(reason)
    assert topic_size(door_topic, kafka_bootstrap) == 0


def test_a_little_nesting_in_extra_fields_is_accepted(door_topic, door, kafka_bootstrap):
    response = door.post(URL, [result(extra={"tags": [{"k": ["v"]}]})], format="json")
    assert response.status_code == 202, response.content


def test_a_body_over_the_cap_is_413_json_and_publishes_nothing(
    door_topic, door, kafka_bootstrap, settings
):
    settings.INGEST_HTTP_MAX_BODY_BYTES = 2_000
    fits = json.dumps([result() for _ in range(8)]).encode()
    assert len(fits) <= 2_000
    assert post_raw(door, fits).status_code == 202

    too_big = json.dumps([result() for _ in range(20)]).encode()
    response = post_raw(door, too_big)
    assert response.status_code == 413
    assert response["Content-Type"].startswith("application/json")
    assert "2000 bytes" in response.json()["detail"]
    assert topic_size(door_topic, kafka_bootstrap) == 8


def test_a_declared_length_over_the_cap_is_413_before_reading(door_topic, door, settings):
    settings.INGEST_HTTP_MAX_BODY_BYTES = 2_000
    # The test client's payload refuses reads past its 2 bytes: the 413 comes from the header.
    response = post_raw(door, b"[]", CONTENT_LENGTH=str(10**12))
    assert response.status_code == 413
    assert "detail" in response.json()


def test_the_default_cap_takes_the_largest_list(settings):
    body = json.dumps([result() for _ in range(1000)], indent=2).encode()
    assert len(body) < settings.INGEST_HTTP_MAX_BODY_BYTES
    parsed = BoundedJSONParser().parse(io.BytesIO(body), parser_context={})
    assert len(parsed) == 1000


class EndlessStream(io.RawIOBase):
    """A body without a declared length that never ends (a chunked upload, say)."""

    def __init__(self) -> None:
        self.served = 0

    def read(self, size: int | None = -1) -> bytes:
        assert size is not None, "an unbounded read"
        assert size >= 0, "an unbounded read"
        self.served += size
        return b" " * size


def test_an_undeclared_length_is_read_only_to_the_cap(settings):
    settings.INGEST_HTTP_MAX_BODY_BYTES = 4096
    stream = EndlessStream()
    with pytest.raises(RequestBodyTooLarge):
        BoundedJSONParser().parse(cast(IO[Any], stream), parser_context={})
    assert stream.served == 4097


def test_parser_errors_are_parse_errors():
    with pytest.raises(ParseError):
        BoundedJSONParser().parse(io.BytesIO(b"[" * 5000), parser_context={})


def test_413_is_in_the_openapi_schema(client):
    response = client.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    operation = json.loads(response.content)["paths"]["/api/match-results"]["post"]
    assert "413" in operation["responses"]
    assert "content" in operation["responses"]["413"]
