"""The rebuild index carries voided_at instead of being partial on it.

0003's partial index (voided_at IS NULL) made the aggregation index-only but no longer served
lookups by season and player that include voided results (the admin's search by player took a
second at 20M rows). Carrying voided_at in the index does both. Built CONCURRENTLY, then the
partial one dropped CONCURRENTLY, so ingestion is not blocked meanwhile.
"""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("ingestion", "0003_match_result_counted_idx"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="matchresult",
            index=models.Index(
                fields=["season", "player_id", "-points", "achieved_at"],
                include=["voided_at"],
                name="match_result_player_idx",
            ),
        ),
        RemoveIndexConcurrently(
            model_name="matchresult",
            name="match_result_counted_idx",
        ),
    ]
