"""The rule, time resolution and codec split move to the season's boards (leaderboard
migration 0005 copied them into each season's ``main`` board first)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("seasons", "0004_rewards_move_to_closeout"),
        ("leaderboard", "0005_boards"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="season", name="season_time_resolution_positive"),
        migrations.RemoveField(model_name="season", name="rule"),
        migrations.RemoveField(model_name="season", name="time_resolution_seconds"),
        migrations.RemoveField(model_name="season", name="time_bits"),
    ]
