"""``python manage.py create_schedule --slug weekly-cup --name "Weekly cup" --cron "0 0 * * 1"
--template-season 12 [--timezone Europe/Paris] [--lead-minutes 60] [--tiers bronze,silver,gold
--promote 20 --relegate 20]``."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from closeout.services import schedule_create
from seasons.leagues import league_tiers_parse
from seasons.selectors import schedule_next_occurrences


class Command(BaseCommand):
    help = (
        "Create a recurring competition: each cron occurrence starts a season with the template "
        "season's boards and reward tiers, ending at the next occurrence."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--slug", required=True, help="[a-z0-9-]{1,32}, unique")
        parser.add_argument("--name", required=True)
        parser.add_argument(
            "--cron", required=True, help='5 fields, e.g. "0 0 * * 1" (Mondays at midnight)'
        )
        parser.add_argument("--template-season", type=int, required=True, dest="template")
        parser.add_argument("--timezone", default="UTC", help="IANA name (default UTC)")
        parser.add_argument(
            "--lead-minutes",
            type=int,
            default=60,
            help="how long before each occurrence its season is created (default 60)",
        )
        parser.add_argument(
            "--tiers",
            default="",
            help="a tiered league: its tiers, lowest first (e.g. bronze,silver,gold); the "
            "template's boards with cohorts become league boards (docs/leagues.md)",
        )
        parser.add_argument(
            "--promote",
            type=int,
            default=0,
            help="percent of each cohort moving up one tier at each close-out (with --tiers)",
        )
        parser.add_argument(
            "--relegate",
            type=int,
            default=0,
            help="percent of each cohort moving down one tier at each close-out (with --tiers)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            schedule = schedule_create(
                slug=options["slug"],
                name=options["name"],
                cron=options["cron"],
                template_season_id=options["template"],
                timezone_name=options["timezone"],
                lead_minutes=options["lead_minutes"],
                tiers=league_tiers_parse(options["tiers"]),
                promote_percent=options["promote"],
                relegate_percent=options["relegate"],
            )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        upcoming = schedule_next_occurrences(schedule=schedule, after=timezone.now(), count=3)
        self.stdout.write(
            self.style.SUCCESS(
                f"created schedule {schedule.slug!r} ({schedule.name}): {schedule.cron} in "
                f"{schedule.timezone}, template season {schedule.template_season_id}; next "
                f"occurrences {', '.join(t.isoformat() for t in upcoming)} (each season created "
                f"{schedule.lead_minutes} minutes before)"
                + (
                    f"; a league of tiers {', '.join(schedule.tiers)}: the top "
                    f"{schedule.promote_percent}% of each cohort move up, the bottom "
                    f"{schedule.relegate_percent}% down at each close-out"
                    if schedule.tiers
                    else ""
                )
            )
        )
