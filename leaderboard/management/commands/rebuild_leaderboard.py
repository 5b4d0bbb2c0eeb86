"""``python manage.py rebuild_leaderboard --season 12 [--day 2026-10-12]``."""

from __future__ import annotations

from datetime import date
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from leaderboard.services import RebuildInProgressError, board_rebuild
from seasons.models import Season


def _day(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError as exc:
        raise CommandError(f"--day {value!r} is not a date (YYYY-MM-DD)") from exc


class Command(BaseCommand):
    help = (
        "Rebuild a season's board (or one UTC day's board) from PostgreSQL, without losing "
        "results ingested meanwhile and without readers ever seeing a partial board."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--season", type=int, required=True, help="season id")
        parser.add_argument("--day", type=_day, default=None, help="UTC day, YYYY-MM-DD")

    def handle(self, *args: Any, **options: Any) -> None:
        season_id: int = options["season"]
        day: date | None = options["day"]
        if not Season.objects.filter(pk=season_id).exists():
            raise CommandError(f"season {season_id} does not exist")
        board = f"season {season_id}" + (f" day {day.isoformat()}" if day else "")
        with tqdm(desc=f"rebuild {board}", unit=" players", unit_scale=True) as bar:
            try:
                result = board_rebuild(
                    season_id=season_id, day=day, progress=bar.update, reason="command"
                )
            except RebuildInProgressError as exc:
                raise CommandError(str(exc)) from exc
        self.stdout.write(
            self.style.SUCCESS(
                f"Rebuilt {board}: {result.members} players ({result.delta_members} written "
                f"during the rebuild) in {result.seconds:.1f}s"
            )
        )
