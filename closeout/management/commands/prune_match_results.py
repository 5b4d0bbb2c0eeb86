from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from closeout.services import (
    season_results_prune,
    season_results_prune_check,
    seasons_results_prune_due,
)


class Command(BaseCommand):
    help = (
        "Delete the match results (and refused results) of closed seasons past "
        "MATCH_RESULTS_RETENTION_DAYS whose history is archived, in batches, as the hourly "
        "task does; their final standings, grants and players' history stay. Safe to run again."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--season",
            type=int,
            dest="season_id",
            default=None,
            help="only this season (closed, past the retention, its history archived); default "
            "every season due",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="list the seasons due and delete nothing"
        )

    def handle(self, *args: Any, season_id: int | None, dry_run: bool, **options: Any) -> None:
        if season_id is None:
            due = seasons_results_prune_due()
        else:
            try:
                season_results_prune_check(season_id=season_id)
            except ValidationError as exc:
                raise CommandError("; ".join(exc.messages)) from exc
            due = [season_id]
        if dry_run or not due:
            self.stdout.write(f"seasons due: {due or 'none'}")
            return
        for season in due:
            self.stdout.write(f"season {season}: pruning")

            def progress(results: int, refused: int, season: int = season) -> None:
                self.stdout.write(
                    f"season {season}: {results} match results, {refused} refused deleted"
                )

            try:
                pruned = season_results_prune(season_id=season, progress=progress)
            except ValidationError as exc:
                raise CommandError("; ".join(exc.messages)) from exc
            self.stdout.write(
                f"season {season}: done, {pruned.results} match results and {pruned.refused} "
                "refused results deleted"
            )
