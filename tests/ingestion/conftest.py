"""Fixtures of the ingestion tests."""

from __future__ import annotations

import pytest

from seasons.models import Season
from tests.helpers import make_season


@pytest.fixture
def door_topic(settings, kafka_topic_factory) -> str:
    """A fresh match-results topic of the test's own, where the HTTP door publishes."""
    settings.KAFKA_MATCH_RESULTS_TOPIC = kafka_topic_factory(prefix="http-door", partitions=2)
    return settings.KAFKA_MATCH_RESULTS_TOPIC


@pytest.fixture
def door_season() -> Season:
    """Season 12, the one the HTTP door tests' results name by default."""
    season: Season = make_season(id=12)
    return season
