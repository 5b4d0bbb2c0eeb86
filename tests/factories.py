from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import factory

from leaderboard.models import MAIN_BOARD, Board, BoardOrder, MatchResult, ScoringRule
from leaderboard.services import board_create, season_setup
from seasons.models import Season

SEASON_START = datetime(2026, 10, 1, tzinfo=UTC)


class SeasonFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Season

    id = factory.Sequence(lambda n: 100 + n)
    name = factory.LazyAttribute(lambda o: f"Season {o.id}")
    starts_at = SEASON_START
    ends_at = factory.LazyAttribute(lambda o: o.starts_at + timedelta(days=90))
    # The main board's settings (passed to season_setup, not Season fields).
    rule = ScoringRule.BEST
    order = BoardOrder.DESC
    time_resolution_seconds = 1

    @classmethod
    def _create(cls, model_class: type[Season], *args: Any, **kwargs: Any) -> Season:
        # Through the service, so the codec split is fixed exactly as in production.
        season_id = kwargs.pop("id")
        status = kwargs.pop("status", None)
        season = season_setup(season_id=season_id, **kwargs)
        if status is not None:
            season.status = status
            season.save(update_fields=["status"])
        return season


def board_factory(season: Season, slug: str, **kwargs: Any) -> Board:
    """Another board of ``season`` through the service (name defaults to the slug)."""
    return board_create(season_id=season.id, slug=slug, name=kwargs.pop("name", slug), **kwargs)


class MatchResultFactory(factory.django.DjangoModelFactory):
    """A stored result; ``board`` defaults to the season's main board, and a given board
    brings its season."""

    class Meta:
        model = MatchResult

    class Params:
        on_board = None

    match_id = factory.LazyFunction(uuid.uuid4)
    player_id = factory.Sequence(lambda n: n + 1)
    season = factory.LazyAttribute(
        lambda o: o.on_board.season if o.on_board is not None else SeasonFactory()
    )
    board = factory.LazyAttribute(
        lambda o: (
            o.on_board
            if o.on_board is not None
            else Board.objects.get(season=o.season, slug=MAIN_BOARD)
        )
    )
    points = 100
    achieved_at = factory.LazyAttribute(lambda o: o.season.starts_at + timedelta(hours=1))
