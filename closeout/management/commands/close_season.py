from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from closeout.services import CloseOutcome, season_close


class Command(BaseCommand):
    help = (
        "Close a season out: stop taking results after its end, wait for the consumer to drain "
        "what is queued, copy the final standings, grant rewards, drop its Redis keys. Safe to "
        "run again."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--season", type=int, required=True, dest="season_id")
        parser.add_argument(
            "--grace-seconds",
            type=int,
            default=None,
            help="grace after the season started closing before the topic's end offsets are "
            "recorded (default SEASON_CLOSE_GRACE_SECONDS)",
        )
        parser.add_argument(
            "--drain-timeout-seconds",
            type=float,
            default=None,
            help="how long to wait for the consumer group to commit up to those end offsets "
            "(default SEASON_CLOSE_DRAIN_TIMEOUT_SECONDS); exits 1 naming what still lags",
        )
        parser.add_argument(
            "--force",
            action="store_true",
            help="finalize now, without the grace and the drain: results still queued in Kafka "
            "are left out of the standings (and dead-lettered once the season is closed)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        grace = options["grace_seconds"]
        if grace is not None and grace < 0:
            raise CommandError("--grace-seconds must be 0 or more")
        drain_timeout = options["drain_timeout_seconds"]
        if drain_timeout is not None and drain_timeout < 0:
            raise CommandError("--drain-timeout-seconds must be 0 or more")
        try:
            result = season_close(
                season_id=options["season_id"],
                grace_seconds=grace,
                drain_timeout_seconds=drain_timeout,
                force=options["force"],
            )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        if result.outcome == CloseOutcome.LAGGING:
            raise CommandError(result.describe())
        unfinished = result.outcome in (CloseOutcome.DRAINING, CloseOutcome.IN_PROGRESS)
        style = self.style.WARNING if unfinished else self.style.SUCCESS
        self.stdout.write(style(result.describe()))
