"""``python manage.py rebuild_leaderboard --season 12 [--board SLUG]
[--day 2026-10-12 | --all-days]``."""

from __future__ import annotations

from argparse import ArgumentTypeError
from collections.abc import Callable
from contextlib import ExitStack
from datetime import date
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from leaderboard.selectors.boards import BoardRef, board_list
from leaderboard.services import (
    RebuildInProgressError,
    RebuildResult,
    SeasonClosedError,
    board_all_rebuild,
    board_rebuild,
)
from seasons.models import Season


def _day(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError as exc:
        # argparse's own error (usage and a one-line reason): a CommandError raised while the
        # arguments are parsed escapes Django's handler as a traceback.
        raise ArgumentTypeError(f"{value!r} is not a date (YYYY-MM-DD)") from exc


def _overflow_note(result: RebuildResult) -> str:
    if not result.overflowed:
        return ""
    return f"; {len(result.overflowed)} player(s) left off: cumulative points overflow the codec"


class Command(BaseCommand):
    help = (
        "Rebuild a season's boards (or one board, or one UTC day's board, or with every daily "
        "board) from PostgreSQL, without losing results ingested meanwhile and without readers "
        "ever seeing a partial board."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--season", type=int, required=True, help="season id")
        parser.add_argument(
            "--board", default=None, help="board slug (default: every board of the season)"
        )
        which = parser.add_mutually_exclusive_group()
        which.add_argument("--day", type=_day, default=None, help="UTC day, YYYY-MM-DD")
        which.add_argument(
            "--all-days",
            action="store_true",
            help="also every daily board: those in Redis and every day with a counted result "
            "(then the weekly boards in Redis built from them)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        season_id: int = options["season"]
        day: date | None = options["day"]
        if not Season.objects.filter(pk=season_id).exists():
            raise CommandError(f"season {season_id} does not exist")
        boards = board_list(season_id=season_id)
        if options["board"] is not None:
            boards = [b for b in boards if b.slug == options["board"]]
            if not boards:
                raise CommandError(f"season {season_id} has no board {options['board']!r}")
        try:
            for board in boards:
                if options["all_days"]:
                    self._all_days(board)
                else:
                    self._one(board, day)
        except (RebuildInProgressError, SeasonClosedError) as exc:
            raise CommandError(str(exc)) from exc

    def _one(self, board: BoardRef, day: date | None) -> None:
        name = f"season {board.season_id} board {board.slug}" + (
            f" day {day.isoformat()}" if day else ""
        )
        with tqdm(desc=f"rebuild {name}", unit=" players", unit_scale=True) as bar:
            result = board_rebuild(
                board_id=board.id, day=day, progress=bar.update, reason="command"
            )
        self.stdout.write(
            self.style.SUCCESS(
                f"Rebuilt {name}: {result.members} players ({result.delta_members} written "
                f"during the rebuild) in {result.seconds:.1f}s{_overflow_note(result)}"
            )
        )

    def _all_days(self, board: BoardRef) -> None:
        with ExitStack() as bars:

            def progress(name: str) -> Callable[[int], None]:
                bar = bars.enter_context(
                    tqdm(desc=f"rebuild {name}", unit=" players", unit_scale=True)
                )
                return bar.update

            rebuilt = board_all_rebuild(
                board_id=board.id, all_days=True, reason="command --all-days", progress=progress
            )
        self.stdout.write(self.style.SUCCESS(f"Rebuilt {rebuilt.describe()}"))
