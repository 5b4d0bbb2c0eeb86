"""Boards: a season holds several, each with its own order, rule and codec split.

Every existing season gets its ``main`` board, carrying the rule, time resolution and codec split
the season had (seasons migration 0005 then drops them from the season), and every existing
result, rebuild and reconcile record belongs to it. Nothing else changes for existing data: the
``/leaderboard/...`` API paths and messages without a "board" field mean ``main``.

The UPDATE below rewrites every match result once (minutes at tens of millions of rows); the
boards' Redis keys change name (``lb:{s<season>}`` -> ``lb:{b<board>}``), so rebuild the live
seasons' boards after migrating: ``manage.py rebuild_leaderboard --season N --all-days``.
"""

import django.core.validators
import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

_SLUG = r"^[a-z0-9-]{1,32}$"

_PROTECT_FUNCTION = "leaderboard_board_protect_match_results"
_PROTECT_CREATE = f"""
CREATE FUNCTION {_PROTECT_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.id = OLD.id THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM ingestion_matchresult WHERE board_id = OLD.id) THEN
        RAISE EXCEPTION 'board % has match results and cannot be deleted or renumbered', OLD.id
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END
$$;
-- AFTER, as a foreign key's own check (see ingestion migration 0006 for the season's twin).
CREATE TRIGGER {_PROTECT_FUNCTION} AFTER DELETE OR UPDATE OF id ON leaderboard_board
    FOR EACH ROW EXECUTE FUNCTION {_PROTECT_FUNCTION}();
"""
_PROTECT_DROP = f"""
DROP TRIGGER IF EXISTS {_PROTECT_FUNCTION} ON leaderboard_board;
DROP FUNCTION IF EXISTS {_PROTECT_FUNCTION}();
"""


def main_boards_create(apps, schema_editor):
    season_model = apps.get_model("seasons", "Season")
    board_model = apps.get_model("leaderboard", "Board")
    for season in season_model.objects.all().iterator():
        board_model.objects.get_or_create(
            season_id=season.id,
            slug="main",
            defaults={
                "name": "Main",
                "order": "desc",
                "rule": season.rule,
                "time_resolution_seconds": season.time_resolution_seconds,
                "time_bits": season.time_bits,
            },
        )


def main_boards_restore(apps, schema_editor):
    season_model = apps.get_model("seasons", "Season")
    board_model = apps.get_model("leaderboard", "Board")
    for board in board_model.objects.filter(slug="main"):
        season_model.objects.filter(id=board.season_id).update(
            rule=board.rule,
            time_resolution_seconds=board.time_resolution_seconds,
            time_bits=board.time_bits,
        )


_FILL = """
UPDATE {table} t SET board_id = b.id
FROM leaderboard_board b
WHERE b.season_id = t.season_id AND b.slug = 'main' AND t.board_id IS NULL
"""


class Migration(migrations.Migration):
    dependencies = [
        ("leaderboard", "0004_match_result_from_ingestion"),
        ("seasons", "0004_rewards_move_to_closeout"),
    ]

    operations = [
        migrations.CreateModel(
            name="Board",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("slug", models.CharField(help_text='Names the board in the API and in match results ("board").', max_length=32, validators=[django.core.validators.RegexValidator("^[a-z0-9-]{1,32}$", "1 to 32 characters: a-z, 0-9 and '-'.")])),
                ("name", models.CharField(max_length=200)),
                ("order", models.CharField(choices=[("desc", "Higher wins"), ("asc", "Lower wins")], default="desc", max_length=4)),
                ("rule", models.CharField(choices=[("best", "Best single match"), ("latest", "Latest result"), ("cumulative", "Sum over matches")], default="best", max_length=16)),
                ("time_resolution_seconds", models.PositiveIntegerField(default=1, help_text="Tie-break granularity: equal points reached in one tick tie.")),
                ("time_bits", models.PositiveSmallIntegerField(editable=False)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                ("season", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="boards", to="seasons.season")),
            ],
            options={
                "ordering": ["season", "id"],
                "constraints": [
                    models.UniqueConstraint(fields=("season", "slug"), name="board_season_slug_uniq"),
                    models.CheckConstraint(condition=models.Q(("slug__regex", _SLUG)), name="board_slug_format"),
                    models.CheckConstraint(condition=models.Q(("time_resolution_seconds__gte", 1)), name="board_time_resolution_positive"),
                    models.CheckConstraint(condition=models.Q(("order__in", ["desc", "asc"])), name="board_order_valid"),
                    models.CheckConstraint(condition=models.Q(("rule__in", ["best", "latest", "cumulative"])), name="board_rule_valid"),
                ],
            },
        ),
        migrations.RunPython(main_boards_create, main_boards_restore),
        # Match results: the board, filled with the season's main board.
        migrations.AddField(
            model_name="matchresult",
            name="board",
            field=models.ForeignKey(db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.PROTECT, related_name="match_results", to="leaderboard.board"),
        ),
        migrations.RunSQL(_FILL.format(table="ingestion_matchresult"), reverse_sql=migrations.RunSQL.noop),
        migrations.AlterField(
            model_name="matchresult",
            name="board",
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name="match_results", to="leaderboard.board"),
        ),
        migrations.RunSQL(_PROTECT_CREATE, reverse_sql=_PROTECT_DROP),
        migrations.RemoveConstraint(model_name="matchresult", name="match_result_match_player_uniq"),
        migrations.AddConstraint(
            model_name="matchresult",
            constraint=models.UniqueConstraint(fields=("match_id", "player_id", "board"), name="match_result_match_player_board_uniq"),
        ),
        migrations.RemoveIndex(model_name="matchresult", name="match_result_player_idx"),
        migrations.AddIndex(
            model_name="matchresult",
            index=models.Index(fields=["board", "player_id", "-points", "achieved_at"], include=("voided_at",), name="match_result_board_player_idx"),
        ),
        # Rebuild and reconcile records: the board they ran on.
        migrations.AddField(
            model_name="rebuildrun",
            name="board",
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name="rebuilds", to="leaderboard.board"),
        ),
        migrations.AddField(
            model_name="reconcilerun",
            name="board",
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name="reconciles", to="leaderboard.board"),
        ),
        migrations.RunSQL(_FILL.format(table="leaderboard_rebuildrun"), reverse_sql=migrations.RunSQL.noop),
        migrations.RunSQL(_FILL.format(table="leaderboard_reconcilerun"), reverse_sql=migrations.RunSQL.noop),
        migrations.AlterField(
            model_name="rebuildrun",
            name="board",
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="rebuilds", to="leaderboard.board"),
        ),
        migrations.AlterField(
            model_name="reconcilerun",
            name="board",
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="reconciles", to="leaderboard.board"),
        ),
        migrations.AlterField(
            model_name="rebuildrun",
            name="day",
            field=models.DateField(blank=True, help_text="Empty: the season-long board.", null=True),
        ),
        migrations.AlterField(
            model_name="reconcilerun",
            name="day",
            field=models.DateField(blank=True, help_text="Empty: the season-long board.", null=True),
        ),
    ]
