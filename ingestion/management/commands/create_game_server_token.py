"""``manage.py create_game_server_token --name NAME``: a token for the HTTP door, for scripts.

The new token is printed once, alone on the last line of the output (``... | tail -n 1``); only
its digest is stored. Staff still list and deactivate tokens in the admin.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ingestion.services import game_server_token_create


class Command(BaseCommand):
    help = (
        "Create a game-server token for the HTTP door and print it once, alone on the last "
        "line of the output (only its digest is stored)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True, help="the game server's name (unique)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            token, raw_token = game_server_token_create(name=options["name"])
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        self.stdout.write(
            f"created game-server token {token.name!r} (prefix {token.token_prefix}); "
            "it is shown once, here:"
        )
        self.stdout.write(raw_token)
