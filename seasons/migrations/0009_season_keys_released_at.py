from django.db import migrations, models
from django.db.models.functions import Coalesce


def closed_seasons_released(apps, schema_editor):
    # Seasons closed before the column existed: their close-out unlinked their keys (a close-out
    # stopped before it is the rare case the column now catches; those keys stay until
    # close_season is run again on the season, as before).
    Season = apps.get_model("seasons", "Season")
    Season.objects.filter(status="closed", keys_released_at=None).update(
        keys_released_at=Coalesce(models.F("closed_at"), models.F("updated_at"))
    )


class Migration(migrations.Migration):
    dependencies = [
        ("seasons", "0008_season_results_pruned_at"),
    ]

    operations = [
        migrations.AddField(
            model_name="season",
            name="keys_released_at",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.RunPython(closed_seasons_released, migrations.RunPython.noop),
    ]
