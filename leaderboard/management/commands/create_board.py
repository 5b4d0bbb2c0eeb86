"""``python manage.py create_board --season 12 --slug lap-times --name "Lap times" --order asc
--rule best [--time-resolution 1]``."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from leaderboard.models import BoardOrder, ScoringRule
from leaderboard.services import board_create


class Command(BaseCommand):
    help = (
        "Add a board to a season (its order, rule and codec split are fixed once it has results)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--season", type=int, required=True, dest="season_id")
        parser.add_argument("--slug", required=True, help="[a-z0-9-]{1,32}, unique in the season")
        parser.add_argument("--name", required=True)
        parser.add_argument(
            "--order",
            choices=BoardOrder.values,
            default=BoardOrder.DESC,
            help="desc: higher wins (default); asc: lower wins (lap times)",
        )
        parser.add_argument("--rule", choices=ScoringRule.values, default=ScoringRule.BEST)
        parser.add_argument(
            "--time-resolution",
            type=int,
            default=1,
            dest="time_resolution_seconds",
            help="tie-break resolution in seconds (default 1)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            board = board_create(
                season_id=options["season_id"],
                slug=options["slug"],
                name=options["name"],
                order=options["order"],
                rule=options["rule"],
                time_resolution_seconds=options["time_resolution_seconds"],
            )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        codec = board.codec
        self.stdout.write(
            self.style.SUCCESS(
                f"created board {board.slug!r} ({board.name}) of season {board.season_id}: "
                f"{board.rule}, {board.order}; score codec {codec.points_bits} points bits "
                f"(max {codec.max_points}) + {codec.time_bits} time bits at "
                f"{codec.resolution_seconds}s"
            )
        )
