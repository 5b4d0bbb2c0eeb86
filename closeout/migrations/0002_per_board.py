"""Reward tiers, final standings and grants belong to a board; existing ones to their season's
``main`` board (created by leaderboard migration 0005)."""

import django.contrib.postgres.constraints
import django.contrib.postgres.fields.ranges
import django.db.models.deletion
from django.db import migrations, models

_FILL = """
UPDATE {table} t SET board_id = b.id
FROM leaderboard_board b
WHERE b.season_id = t.season_id AND b.slug = 'main' AND t.board_id IS NULL
"""


def _board_field(related_name, null):
    return models.ForeignKey(
        null=null,
        on_delete=django.db.models.deletion.CASCADE,
        related_name=related_name,
        to="leaderboard.board",
    )


class Migration(migrations.Migration):
    dependencies = [
        ("closeout", "0001_initial"),
        ("leaderboard", "0005_boards"),
    ]

    operations = [
        *[
            op
            for model, table, related in (
                ("rewardtier", "seasons_rewardtier", "reward_tiers"),
                ("finalstanding", "seasons_finalstanding", "final_standings"),
                ("rewardgrant", "seasons_rewardgrant", "reward_grants"),
            )
            for op in (
                migrations.AddField(
                    model_name=model, name="board", field=_board_field(related, True)
                ),
                migrations.RunSQL(_FILL.format(table=table), reverse_sql=migrations.RunSQL.noop),
                migrations.AlterField(
                    model_name=model, name="board", field=_board_field(related, False)
                ),
            )
        ],
        migrations.RemoveConstraint(model_name="rewardtier", name="reward_tier_no_overlap"),
        migrations.AddConstraint(
            model_name="rewardtier",
            constraint=django.contrib.postgres.constraints.ExclusionConstraint(
                expressions=[
                    ("board", "="),
                    (
                        models.Func(
                            models.F("rank_from"),
                            models.F("rank_to"),
                            models.Value("[]"),
                            function="int4range",
                            output_field=django.contrib.postgres.fields.ranges.IntegerRangeField(),
                        ),
                        "&&",
                    ),
                ],
                name="reward_tier_board_no_overlap",
            ),
        ),
        migrations.RemoveConstraint(model_name="finalstanding", name="final_standing_season_rank"),
        migrations.RemoveConstraint(model_name="finalstanding", name="final_standing_season_player"),
        migrations.AddConstraint(
            model_name="finalstanding",
            constraint=models.UniqueConstraint(fields=("board", "rank"), name="final_standing_board_rank"),
        ),
        migrations.AddConstraint(
            model_name="finalstanding",
            constraint=models.UniqueConstraint(fields=("board", "player_id"), name="final_standing_board_player"),
        ),
        migrations.RemoveConstraint(model_name="rewardgrant", name="reward_grant_season_player"),
        migrations.AddConstraint(
            model_name="rewardgrant",
            constraint=models.UniqueConstraint(fields=("board", "player_id"), name="reward_grant_board_player"),
        ),
        migrations.AlterModelOptions(name="rewardtier", options={"ordering": ["season", "board", "rank_from"]}),
        migrations.AlterModelOptions(name="finalstanding", options={"ordering": ["season", "board", "rank"]}),
        migrations.AlterModelOptions(name="rewardgrant", options={"ordering": ["season", "board", "rank"]}),
    ]
