"""``manage.py create_webhook --url URL --secret S [--types ...] [--board <season>/<slug>]``.

Registers a webhook endpoint (staff still manage it in the admin). The secret is stored
encrypted (webhooks/crypto.py); without --secret one is generated and printed once, alone on
the last line of the output, so provisioning can be scripted (``... | tail -n 1``).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from webhooks.events import EVENT_TYPES
from webhooks.services import SECRET_MIN_LENGTH, webhook_endpoint_create


class Command(BaseCommand):
    help = "Register a webhook endpoint that receives rank events (signed JSON arrays)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--url", required=True, help="http(s) URL the events are POSTed to")
        parser.add_argument(
            "--secret",
            help=f"the signing secret (at least {SECRET_MIN_LENGTH} characters); "
            "default: a generated one, printed once",
        )
        parser.add_argument(
            "--types",
            default="",
            help=f"comma-separated event types ({', '.join(EVENT_TYPES)}); default: all",
        )
        parser.add_argument(
            "--board",
            action="append",
            default=[],
            metavar="SEASON/SLUG",
            help="only events of this board (repeat for several); default: every board",
        )
        parser.add_argument("--name", default="", help="a label for staff")
        parser.add_argument(
            "--inactive", action="store_true", help="register it paused (activate in the admin)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            endpoint, secret = webhook_endpoint_create(
                url=options["url"],
                secret=options["secret"],
                event_types=options["types"].split(","),
                boards=options["board"],
                name=options["name"],
                is_active=not options["inactive"],
            )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        types = ", ".join(endpoint.event_types) or "every type"
        boards = ", ".join(endpoint.boards) or "every board"
        self.stdout.write(
            f"created webhook endpoint {endpoint.id} -> {endpoint.url} ({types}; {boards}"
            f"{'' if endpoint.is_active else '; inactive'})"
        )
        if options["secret"] is None:
            self.stdout.write("its signing secret is shown once, here:")
            self.stdout.write(secret)
