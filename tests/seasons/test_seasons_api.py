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
