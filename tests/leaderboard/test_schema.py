"""The OpenAPI schema is generated from the views and valid; the docs page renders."""

from __future__ import annotations

import importlib.metadata
import json

import pytest
from drf_spectacular.validation import validate_schema


@pytest.mark.django_db
def test_schema_is_valid_openapi_3_and_documents_every_read_operation(client):
    response = client.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    schema = json.loads(response.content)
    validate_schema(schema)
    assert schema["openapi"].startswith("3.")
    # The release of the contracts served (README, "Contracts and versions"): the package's.
    assert schema["info"]["version"] == importlib.metadata.version("leaderboard")
    assert schema["info"]["version"].startswith("0.3.")
    paths = schema["paths"]
    board = "/api/seasons/{season}/leaderboard"
    for path in [
        "/api/seasons",
        f"{board}/top",
        f"{board}/players/{{player}}",
        f"{board}/players/{{player}}/around",
        f"{board}/ranks",
        f"{board}/friends",
        f"{board}/daily/{{day}}/top",
        f"{board}/weekly/{{week}}/top",
    ]:
        assert "get" in paths[path], path
    top = paths[f"{board}/top"]["get"]
    top_params = {p["name"]: p for p in top["parameters"] if p["in"] in {"path", "query"}}
    assert set(top_params) == {"season", "limit"}
    # The bounds the views enforce, stated in the schema.
    assert top_params["season"]["schema"] == {
        "type": "integer",
        "format": "int64",
        "minimum": 1,
        "maximum": 2**63 - 1,
    }
    assert top_params["limit"]["schema"]["maximum"] == 1000
    assert set(top["responses"]) == {"200", "304", "400", "404", "429", "503"}
    assert "Retry-After" in top["responses"]["503"]["headers"]
    door = paths["/api/match-results"]["post"]
    body = door["requestBody"]["content"]["application/json"]["schema"]
    assert [branch["type"] for branch in body["oneOf"]] == ["object", "array"]
    assert body["oneOf"][1]["maxItems"] == 1000
    entry = schema["components"]["schemas"]["RankingEntry"]["properties"]
    assert set(entry) == {
        "rank",
        "playerId",
        "points",
        "displayName",
        "country",
        "tiebreakers",
        "metadata",
        "tier",
        "attempts",
    }
    assert entry["tiebreakers"]["additionalProperties"] == {"type": "integer"}
    assert entry["displayName"]["nullable"] is True
    # Only boards that keep metadata carry it: not required, null when the result had none.
    required = schema["components"]["schemas"]["RankingEntry"]["required"]
    assert "metadata" not in required
    assert entry["metadata"]["nullable"] is True
    assert entry["country"]["nullable"] is True
    # Only league boards carry the tier: not required, null while the player is in no cohort.
    assert "tier" not in required
    assert entry["tier"]["nullable"] is True
    # Only boards with max-attempts carry the attempts: not required, never null.
    assert "attempts" not in required
    assert entry["attempts"]["type"] == "integer"
    assert "nullable" not in entry["attempts"]
    standing = schema["components"]["schemas"]["PlayerStanding"]["properties"]
    assert {"displayName", "country", "attempts"} <= set(standing)
    # A final standing on a board with max-attempts: the attempts stored at close-out.
    final = schema["components"]["schemas"]["FinalEntry"]
    assert final["properties"]["attempts"]["type"] == "integer"
    assert "attempts" not in final.get("required", [])
    # A card's board row: tier on league boards, cohort on boards with cohorts, both
    # nullable (no cohort yet) and left out elsewhere.
    card_board = schema["components"]["schemas"]["CardBoard"]
    assert set(card_board["properties"]) == {
        "seasonId",
        "board",
        "rank",
        "points",
        "percentile",
        "tier",
        "cohort",
    }
    assert {"tier", "cohort"}.isdisjoint(card_board["required"])
    assert card_board["properties"]["tier"]["nullable"] is True
    assert card_board["properties"]["cohort"]["nullable"] is True
    assert card_board["properties"]["cohort"]["type"] == "integer"
    # Every code a 503 carries (leaderboard/unavailable.py), the weekly reads' included.
    assert set(schema["components"]["schemas"]["ErrorCodeEnum"]["enum"]) == {
        "database_unavailable",
        "redis_unavailable",
        "board_recovering",
        "week_unavailable",
    }


@pytest.mark.django_db
def test_docs_page_renders(client):
    response = client.get("/api/docs")
    assert response.status_code == 200
    assert b"swagger" in response.content.lower()


@pytest.mark.django_db
def test_schema_generates_without_warnings(tmp_path):
    from django.core.management import call_command

    # --fail-on-warn: e.g. two serializers sharing a component name would silently merge.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "s.yaml"))
