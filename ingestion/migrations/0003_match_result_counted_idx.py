"""The rebuild index becomes partial (counted rows only), so the aggregation is index-only.

Built CONCURRENTLY, then the old one dropped CONCURRENTLY: on a live results table a plain
CREATE INDEX would block ingestion for as long as the build takes.
"""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("ingestion", "0002_match_result_ingest_xid"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="matchresult",
            index=models.Index(
                condition=models.Q(voided_at__isnull=True),
                fields=["season", "player_id", "-points", "achieved_at"],
                name="match_result_counted_idx",
            ),
        ),
        RemoveIndexConcurrently(
            model_name="matchresult",
            name="match_result_rebuild_idx",
        ),
    ]
