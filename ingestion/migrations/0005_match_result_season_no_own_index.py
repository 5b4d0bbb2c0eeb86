"""Drop the season foreign key's own index: match_result_player_idx leads with season_id.

Dropped CONCURRENTLY (Django's AlterField would take a lock that waits on, and then blocks,
ingestion); the state change is the field's db_index=False.
"""

import django.db.models.deletion
from django.db import migrations, models

_INDEX = "ingestion_matchresult_season_id_5b36b276"


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("ingestion", "0004_match_result_player_idx"),
        ("seasons", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="matchresult",
                    name="season",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="match_results",
                        to="seasons.season",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX CONCURRENTLY IF EXISTS "{_INDEX}"',
                    reverse_sql=(
                        f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{_INDEX}" '
                        'ON "ingestion_matchresult" ("season_id")'
                    ),
                ),
            ],
        ),
    ]
