from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction

from leaderboard.models import MatchResult
from tests.factories import MatchResultFactory


@pytest.mark.django_db
def test_models_and_migrations_agree() -> None:
    out = StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_migrations_round_trip_to_zero_and_back() -> None:
    call_command("migrate", "ingestion", "zero", verbosity=0)
    call_command("migrate", "seasons", "zero", verbosity=0)
    tables = connection.introspection.table_names()
    assert "ingestion_matchresult" not in tables
    assert "seasons_season" not in tables
    call_command("migrate", verbosity=0)
    tables = connection.introspection.table_names()
    assert {"ingestion_matchresult", "seasons_season"} <= set(tables)


@pytest.mark.django_db
def test_database_enforces_uniqueness_and_non_negative_points() -> None:
    result = MatchResultFactory.create()
    with pytest.raises(IntegrityError), transaction.atomic():
        MatchResult.objects.create(
            match_id=result.match_id,
            player_id=result.player_id,
            season=result.season,
            points=1,
            achieved_at=result.achieved_at,
        )
    with pytest.raises(IntegrityError), transaction.atomic():
        MatchResultFactory.create(season=result.season, points=-1)
