"""Drop the per-row foreign-key check on match results' season; keep what it guaranteed.

PostgreSQL checks a foreign key once per inserted row (a lookup and a row lock on the season):
about a sixth of its CPU per stored result (bench/store.py, docs/ingestion.md).
What it guaranteed is kept by cheaper means:

- inserting: ``match_results_store`` locks the batch's seasons FOR KEY SHARE (the lock the
  check took) in one statement per batch, and sends results of a season deleted meanwhile
  back through validation;
- deleting or renumbering a season that has results: refused by the trigger below, as the
  foreign key refused it (same SQLSTATE, so Django raises IntegrityError as before); Django's
  PROTECT still refuses it first in the ORM.
"""

import django.db.models.deletion
from django.db import migrations, models

_FUNCTION = "seasons_season_protect_match_results"
_TRIGGER = "seasons_season_protect_match_results"

_CREATE = f"""
CREATE FUNCTION {_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.id = OLD.id THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM ingestion_matchresult WHERE season_id = OLD.id) THEN
        RAISE EXCEPTION 'season % has match results and cannot be deleted or renumbered', OLD.id
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END
$$;
-- AFTER, as the foreign key's own check: the row is deleted only once the batches locking it
-- have committed, and the check, run then with a fresh snapshot, sees their rows.
CREATE TRIGGER {_TRIGGER} AFTER DELETE OR UPDATE OF id ON seasons_season
    FOR EACH ROW EXECUTE FUNCTION {_FUNCTION}();
"""
_DROP = f"""
DROP TRIGGER IF EXISTS {_TRIGGER} ON seasons_season;
DROP FUNCTION IF EXISTS {_FUNCTION}();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("ingestion", "0005_match_result_season_no_own_index"),
        ("seasons", "0001_initial"),
    ]

    operations = [
        migrations.RunSQL(_CREATE, reverse_sql=_DROP),
        migrations.AlterField(
            model_name="matchresult",
            name="season",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="match_results",
                to="seasons.season",
            ),
        ),
    ]
