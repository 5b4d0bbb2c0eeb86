from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from leaderboard_project.periodic import periodic_tasks_sync


class Command(BaseCommand):
    help = "Create or update every periodic task of leaderboard_project/schedules.py (idempotent)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--reset",
            action="store_true",
            help="also put back the registry's interval and re-enable tasks staff changed",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        result = periodic_tasks_sync(reset=options["reset"])
        for label, names in (
            ("created", result.created),
            ("updated", result.updated),
            ("unchanged", result.unchanged),
        ):
            for name in names:
                self.stdout.write(f"{label}: {name}")
        self.stdout.write(
            self.style.SUCCESS(
                f"periodic tasks: {len(result.created)} created, {len(result.updated)} updated, "
                f"{len(result.unchanged)} unchanged"
            )
        )
