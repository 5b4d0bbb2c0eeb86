from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from seasons.services import CloseOutcome, season_close


class Command(BaseCommand):
    help = (
        "Close a season out: stop taking results, wait for the consumer to drain, copy the final "
        "standings, grant rewards, drop its Redis keys. Safe to run again."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--season", type=int, required=True, dest="season_id")
        parser.add_argument(
            "--grace-seconds",
            type=int,
            default=None,
            help="drain wait after the season started closing "
            "(default SEASON_CLOSE_GRACE_SECONDS; 0 when the consumer is known to be idle)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        grace = options["grace_seconds"]
        if grace is not None and grace < 0:
            raise CommandError("--grace-seconds must be 0 or more")
        try:
            result = season_close(season_id=options["season_id"], grace_seconds=grace)
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        unfinished = result.outcome in (CloseOutcome.DRAINING, CloseOutcome.IN_PROGRESS)
        style = self.style.WARNING if unfinished else self.style.SUCCESS
        self.stdout.write(style(result.describe()))
