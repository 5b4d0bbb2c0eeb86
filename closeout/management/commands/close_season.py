from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from closeout.services import (
    CloseOutcome,
    SeasonCloseProgress,
    season_close_wait,
    season_history_archive,
)
from leaderboard.management.arguments import SECONDS_MAX, int_between, number_between

# Exit codes besides 0 (the season is closed), 1 (an error: an unknown season) and 2 (bad
# arguments: argparse's).
# Both mean the season is still closing; nothing failed, the periodic close-out carries on.
EXIT_STILL_CLOSING = 3  # --no-wait
EXIT_TIMED_OUT = 4  # --timeout passed


class Command(BaseCommand):
    help = (
        "Close a season out and wait until it is closed: stop taking results after its end, "
        "wait for the consumer to drain what is queued, copy the final standings, grant "
        "rewards, drop its Redis keys. Exits 0 once the season is closed, "
        f"{EXIT_TIMED_OUT} if --timeout passes first, {EXIT_STILL_CLOSING} with --no-wait "
        "while it is still closing. Safe to run again."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--season", type=int, required=True, dest="season_id")
        parser.add_argument(
            "--grace-seconds",
            type=int_between(0, int(SECONDS_MAX)),
            default=None,
            help="grace after the season started closing before the topic's end offsets are "
            "recorded (default SEASON_CLOSE_GRACE_SECONDS)",
        )
        wait = parser.add_mutually_exclusive_group()
        wait.add_argument(
            "--timeout",
            type=number_between(0, SECONDS_MAX),
            default=None,
            metavar="SECONDS",
            help="how long to wait for the season to be closed: the grace, the consumer's "
            "drain, another close-out of it running (default "
            f"SEASON_CLOSE_DRAIN_TIMEOUT_SECONDS); exits {EXIT_TIMED_OUT} saying what it still "
            "waits for",
        )
        wait.add_argument(
            "--no-wait",
            action="store_true",
            help="return at once: switch the season to closing, finalize it only if its grace "
            f"has passed and the consumer has drained already; exits {EXIT_STILL_CLOSING} while "
            "it is still closing (0 once closed)",
        )
        parser.add_argument(
            "--force",
            action="store_true",
            help="finalize now, without the grace and the drain: results still queued in Kafka "
            "are left out of the standings (and dead-lettered once the season is closed)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        grace = options["grace_seconds"]
        timeout = options["timeout"]
        no_wait = options["no_wait"]
        try:
            wait = season_close_wait(
                season_id=options["season_id"],
                timeout_seconds=0.0 if no_wait else timeout,
                grace_seconds=grace,
                force=options["force"],
                on_progress=None if no_wait else self._progress,
            )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        if wait.closed:
            self.stdout.write(self.style.SUCCESS(wait.result.describe()))
            # Every player's history, after the close-out's transaction (docs/schedules.md).
            try:
                archived = season_history_archive(season_id=options["season_id"])
            except ValidationError as exc:
                # The season is closed either way (closed long ago, its results pruned): the
                # history's refusal is news, not a failure of the close-out.
                self.stderr.write(self.style.WARNING(f"history: {'; '.join(exc.messages)}"))
                return
            if archived.boards:
                self.stdout.write(
                    f"history: {archived.rows} players archived over {archived.boards} boards "
                    f"in {archived.seconds:.1f} s"
                )
        elif wait.result.outcome == CloseOutcome.REOPENED:
            raise CommandError(wait.result.describe())
        elif no_wait:
            raise CommandError(wait.result.describe(), returncode=EXIT_STILL_CLOSING)
        else:
            raise CommandError(
                f"timed out: season {options['season_id']} is not closed after "
                f"{wait.waited_seconds:.0f} s (--timeout {wait.timeout_seconds:g}): "
                f"{wait.result.describe()}",
                returncode=EXIT_TIMED_OUT,
            )

    def _progress(self, progress: SeasonCloseProgress) -> None:
        self.stdout.write(progress.describe())
