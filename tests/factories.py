from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import factory

from leaderboard.models import MatchResult
from seasons.models import ScoringRule, Season
from seasons.services import season_create

SEASON_START = datetime(2026, 10, 1, tzinfo=UTC)


class SeasonFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Season

    id = factory.Sequence(lambda n: 100 + n)
    name = factory.LazyAttribute(lambda o: f"Season {o.id}")
    starts_at = SEASON_START
    ends_at = factory.LazyAttribute(lambda o: o.starts_at + timedelta(days=90))
    rule = ScoringRule.BEST
    time_resolution_seconds = 1

    @classmethod
    def _create(cls, model_class: type[Season], *args: Any, **kwargs: Any) -> Season:
        # Through the service, so the codec split is fixed exactly as in production.
        season_id = kwargs.pop("id")
        status = kwargs.pop("status", None)
        season = season_create(season_id=season_id, **kwargs)
        if status is not None:
            season.status = status
            season.save(update_fields=["status"])
        return season


class MatchResultFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = MatchResult

    match_id = factory.LazyFunction(uuid.uuid4)
    player_id = factory.Sequence(lambda n: n + 1)
    season = factory.SubFactory(SeasonFactory)
    points = 100
    achieved_at = factory.LazyAttribute(lambda o: o.season.starts_at + timedelta(hours=1))
