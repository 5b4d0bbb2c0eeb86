from __future__ import annotations

from datetime import UTC, datetime

import pytest

from leaderboard.models import ScoringRule
from seasons.models import SeasonStatus
from tests.factories import SeasonFactory

pytestmark = pytest.mark.django_db


def test_seasons_list_most_recent_first(client):
    SeasonFactory(
        id=901,
        name="Autumn",
        starts_at=datetime(2026, 9, 1, tzinfo=UTC),
        ends_at=datetime(2026, 11, 30, tzinfo=UTC),
        status=SeasonStatus.CLOSED,
    )
    SeasonFactory(
        id=902,
        name="Winter",
        starts_at=datetime(2026, 12, 1, tzinfo=UTC),
        ends_at=datetime(2027, 3, 1, tzinfo=UTC),
        rule=ScoringRule.CUMULATIVE,
    )
    response = client.get("/api/seasons")
    assert response.status_code == 200
    assert response.json() == [
        {
            "id": 902,
            "name": "Winter",
            "status": "scheduled",
            "startsAt": "2026-12-01T00:00:00Z",
            "endsAt": "2027-03-01T00:00:00Z",
            "rule": "cumulative",
            "schedule": None,
            "occurrence": None,
        },
        {
            "id": 901,
            "name": "Autumn",
            "status": "closed",
            "startsAt": "2026-09-01T00:00:00Z",
            "endsAt": "2026-11-30T00:00:00Z",
            "rule": "best",
            "schedule": None,
            "occurrence": None,
        },
    ]


def test_seasons_list_empty(client):
    response = client.get("/api/seasons")
    assert response.status_code == 200
    assert response.json() == []


def _five_seasons() -> list[int]:
    """Seasons 911..915, one a month; 913 active, the rest closed. Most recent first."""
    for n in range(5):
        SeasonFactory(
            id=911 + n,
            starts_at=datetime(2026, 1 + n, 1, tzinfo=UTC),
            ends_at=datetime(2026, 1 + n, 28, tzinfo=UTC),
            status=SeasonStatus.ACTIVE if n == 2 else SeasonStatus.CLOSED,
        )
    return [915, 914, 913, 912, 911]


def test_seasons_list_pages_with_limit_and_offset(client):
    newest_first = _five_seasons()
    assert [s["id"] for s in client.get("/api/seasons").json()] == newest_first
    pages = [
        [s["id"] for s in client.get(f"/api/seasons?limit=2&offset={offset}").json()]
        for offset in (0, 2, 4, 6)
    ]
    assert pages == [[915, 914], [913, 912], [911], []]
    # An offset alone skips, and lists the rest.
    assert [s["id"] for s in client.get("/api/seasons?offset=3").json()] == [912, 911]


def test_seasons_list_filters_by_status(client):
    _five_seasons()
    active = client.get("/api/seasons?status=active").json()
    assert [(s["id"], s["status"]) for s in active] == [(913, "active")]
    closed = client.get("/api/seasons?status=closed&limit=3").json()
    assert [s["id"] for s in closed] == [915, 914, 912]
    assert client.get("/api/seasons?status=scheduled").json() == []


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=x", "limit"),
        ("offset=-1", "offset"),
        ("status=running", "status"),
        ("schedule=-bad", "schedule"),
    ],
)
def test_seasons_list_refuses_a_malformed_filter(client, query, field):
    response = client.get(f"/api/seasons?{query}")
    assert response.status_code == 400
    assert field in response.json()["detail"]
