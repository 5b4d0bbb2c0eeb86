"""players 0001: the table, its constraint and the name index, forwards and backwards."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction

pytestmark = pytest.mark.django_db(transaction=True)


def _indexes() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'player_profiles'")
        return {row[0] for row in cursor.fetchall()}


def test_the_migration_creates_and_drops_the_table_and_its_name_index():
    try:
        call_command("migrate", "players", "zero", verbosity=0)
        assert "player_profiles" not in connection.introspection.table_names()
    finally:
        call_command("migrate", "players", verbosity=0)
    assert "player_profile_name_idx" in _indexes()
    with connection.cursor() as cursor:
        # text_pattern_ops serves a prefix LIKE whatever the database's collation.
        cursor.execute("SET enable_seqscan = off")
        cursor.execute(
            "EXPLAIN SELECT * FROM player_profiles WHERE UPPER(display_name) LIKE 'AB%%'"
        )
        plan = " ".join(row[0] for row in cursor.fetchall())
        cursor.execute("RESET enable_seqscan")
    assert "player_profile_name_idx" in plan
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO player_profiles (player_id, display_name, name_updated_at, hidden,"
            " revision) VALUES (0, 'x', now(), false, 1)"
        )
