"""The suite's database backend empties the tables after a transactional test with DELETE in
an order PostgreSQL accepts, as Django's TRUNCATE did."""

from __future__ import annotations

import pytest
from django.core.management.color import no_style
from django.core.management.sql import sql_flush
from django.db import connection

from leaderboard.models import MatchResult
from leaderboard_project.suite_postgresql.base import _children_first
from seasons.models import Season
from tests.factories import MatchResultFactory
from tests.helpers import make_season

pytestmark = pytest.mark.django_db(transaction=True)


def _tables(statements: list[str]) -> list[str]:
    return [s.removeprefix('DELETE FROM "').removesuffix('";') for s in statements]


def test_a_season_with_match_results_is_emptied_after_its_results_and_boards():
    season = make_season()
    MatchResultFactory.create_batch(3, season=season)
    statements = sql_flush(no_style(), connection, reset_sequences=False)
    assert all(s.startswith("DELETE FROM ") for s in statements)
    order = _tables(statements)
    assert set(order) == set(connection.introspection.django_table_names(only_existing=True))
    results = order.index(MatchResult._meta.db_table)
    # A board or season with results refuses its DELETE (a row trigger), so theirs come last.
    assert results < order.index("leaderboard_board") < order.index(Season._meta.db_table)
    connection.ops.execute_sql_flush(statements)
    assert not Season.objects.exists()
    assert not MatchResult.objects.exists()


def test_restarting_sequences_is_left_to_truncate():
    statements = sql_flush(no_style(), connection, reset_sequences=True)
    assert len(statements) == 1
    assert statements[0].startswith("TRUNCATE ")
    assert statements[0].endswith(" RESTART IDENTITY;")


def test_a_cycle_of_references_is_broken_and_every_table_is_emptied_once():
    # a <-> b reference each other; c references a; d references nothing.
    order = _children_first({"a": {"b", "c"}, "b": {"a"}, "c": set(), "d": set()})
    assert sorted(order) == ["a", "b", "c", "d"]
    assert order.index("c") < order.index("a")
