from typing import Any

from django.db import migrations, models


def attempts_backfill(apps: Any, schema_editor: Any) -> None:
    """The final standings of closed boards with max-attempts get their players' attempts,
    counted as ingestion counts them (stored results, voided ones included), where the
    season's match results are still kept; past the retention they stay null (unknown)."""
    tables = {
        name: apps.get_model(app, model)._meta.db_table
        for name, (app, model) in {
            "standings": ("closeout", "FinalStanding"),
            "results": ("leaderboard", "MatchResult"),
            "boards": ("leaderboard", "Board"),
            "seasons": ("seasons", "Season"),
        }.items()
    }
    schema_editor.execute(
        """
        UPDATE {standings} f SET attempts = (
            SELECT count(*) FROM {results} r
            WHERE r.board_id = f.board_id AND r.player_id = f.player_id
        )
        FROM {boards} b JOIN {seasons} s ON s.id = b.season_id
        WHERE b.id = f.board_id AND b.max_attempts IS NOT NULL AND s.results_pruned_at IS NULL
        """.format(**tables)
    )


class Migration(migrations.Migration):

    dependencies = [
        ('closeout', '0007_league_rewards_history'),
        ('leaderboard', '0011_board_tournaments'),
        ('seasons', '0008_season_results_pruned_at'),
    ]

    operations = [
        migrations.AddField(
            model_name='finalstanding',
            name='attempts',
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.RunPython(attempts_backfill, migrations.RunPython.noop),
    ]
