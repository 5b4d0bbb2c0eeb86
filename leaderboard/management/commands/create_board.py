"""``python manage.py create_board --season 12 --slug lap-times --name "Lap times" --order asc
--rule best [--time-resolution 1]``."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from leaderboard.management.board_options import (
    board_spec_arguments,
    board_spec_values,
    codec_description,
    tournament_description,
)
from leaderboard.services import board_create


class Command(BaseCommand):
    help = (
        "Add a board to a season (its order, rule and codec split are fixed once it has results)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--season", type=int, required=True, dest="season_id")
        parser.add_argument("--slug", required=True, help="[a-z0-9-]{1,32}, unique in the season")
        parser.add_argument("--name", required=True)
        board_spec_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            board = board_create(
                season_id=options["season_id"],
                slug=options["slug"],
                name=options["name"],
                **board_spec_values(options),
            )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        self.stdout.write(
            self.style.SUCCESS(
                f"created board {board.slug!r} ({board.name}) of season {board.season_id}: "
                f"{board.rule}, {board.order}; "
                + codec_description(board.codec, board.tiebreaks)
                + tournament_description(
                    join_required=board.join_required,
                    max_size=board.max_size,
                    max_attempts=board.max_attempts,
                )
            )
        )
