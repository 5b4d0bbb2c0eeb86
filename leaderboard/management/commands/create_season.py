from __future__ import annotations

from argparse import ArgumentParser, ArgumentTypeError
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from leaderboard.management.board_options import (
    board_spec_arguments,
    board_spec_values,
    codec_description,
    tournament_description,
)
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
        board_spec_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            season = season_setup(
                season_id=options["season_id"],
                name=options["name"],
                starts_at=options["starts_at"],
                ends_at=options["ends_at"],
                **board_spec_values(options),
            )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        board = season.boards.get()
        self.stdout.write(
            self.style.SUCCESS(
                f"created season {season.id} {season.name!r} with board {board.slug!r} "
                f"({board.rule}, {board.order}), "
                f"{season.starts_at.isoformat()} to {season.ends_at.isoformat()}; "
                + codec_description(board.codec, board.tiebreaks)
                + tournament_description(
                    join_required=board.join_required,
                    max_size=board.max_size,
                    max_attempts=board.max_attempts,
                )
            )
        )
