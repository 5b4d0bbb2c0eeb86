from __future__ import annotations

from argparse import ArgumentParser, ArgumentTypeError
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from leaderboard.models import BoardOrder, ScoringRule
from leaderboard.services import season_setup


def _rfc3339(value: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise ArgumentTypeError(f"{value!r} is not an RFC 3339 timestamp") from exc
    if parsed.tzinfo is None:
        raise ArgumentTypeError(f"{value!r} has no UTC offset (add Z or +00:00)")
    return parsed


class Command(BaseCommand):
    help = "Create a season with its main board (--rule, --order, --time-resolution configure it)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--id", type=int, required=True, dest="season_id")
        parser.add_argument("--name", required=True)
        parser.add_argument("--starts-at", type=_rfc3339, required=True)
        parser.add_argument("--ends-at", type=_rfc3339, required=True)
        parser.add_argument("--rule", choices=ScoringRule.values, default=ScoringRule.BEST)
        parser.add_argument(
            "--order",
            choices=BoardOrder.values,
            default=BoardOrder.DESC,
            help="desc: higher wins (default); asc: lower wins",
        )
        parser.add_argument(
            "--time-resolution",
            type=int,
            default=1,
            dest="time_resolution_seconds",
            help="tie-break resolution in seconds (default 1)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            season = season_setup(
                season_id=options["season_id"],
                name=options["name"],
                starts_at=options["starts_at"],
                ends_at=options["ends_at"],
                rule=options["rule"],
                order=options["order"],
                time_resolution_seconds=options["time_resolution_seconds"],
            )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        board = season.boards.get()
        codec = board.codec
        self.stdout.write(
            self.style.SUCCESS(
                f"created season {season.id} {season.name!r} with board {board.slug!r} "
                f"({board.rule}, {board.order}), "
                f"{season.starts_at.isoformat()} to {season.ends_at.isoformat()}; "
                f"score codec {codec.points_bits} points bits (max {codec.max_points}) + "
                f"{codec.time_bits} time bits at {codec.resolution_seconds}s"
            )
        )
