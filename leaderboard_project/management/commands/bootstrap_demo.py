from __future__ import annotations

import secrets
from argparse import ArgumentParser
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand

from closeout.models import RewardTier
from closeout.services import (
    reward_tier_create,
    schedule_create,
    schedule_league_set,
    schedules_advance,
)
from leaderboard.management.arguments import PORT_MAX, int_between
from leaderboard.models import MAIN_BOARD, Board, BoardOrder, ScoringRule, TiebreakColumn
from leaderboard.services import board_create, season_setup
from seasons.models import Schedule, Season, SeasonStatus
from webhooks.models import WebhookEndpoint
from webhooks.services import webhook_endpoint_create, webhook_endpoint_url_set

DEMO_SEASON_ID = 1
# The demo season's boards besides main (score): kills add up, lap times rank lowest first and
# keep each lap's metadata (the car, the replay), and the arena ranks by points, then most
# kills, then fewest deaths (tie-break columns).
ARENA_COLUMNS = (TiebreakColumn("kills", "desc"), TiebreakColumn("deaths", "asc"))
DEMO_BOARDS = (
    ("kills", "Kills", BoardOrder.DESC, ScoringRule.CUMULATIVE, False, ()),
    ("lap-times", "Lap times (ms)", BoardOrder.ASC, ScoringRule.BEST, True, ()),
    (
        "arena",
        "Arena (points, kills, fewest deaths)",
        BoardOrder.DESC,
        ScoringRule.BEST,
        False,
        ARENA_COLUMNS,
    ),
)


# The demo tournament (docs/tournaments.md): players join it (the simulator seats its players
# through the join service first), 64 seats, 5 attempts each.
DEMO_TOURNAMENT = ("tournament", "Tournament (64 seats, 5 attempts)")
DEMO_TOURNAMENT_SEATS = 64
DEMO_TOURNAMENT_ATTEMPTS = 5


# The demo cup: a competition that resets every 10 minutes (make run's "cup" process plays
# it), copying its template season's boards and reward tiers into each new season.
DEMO_CUP_TEMPLATE_ID = 2
DEMO_CUP = "demo-cup"
DEMO_CUP_TIERS = ((1, 1, "Cup trophy"), (2, 3, "Cup medal"), (4, 10, "Cup badge"))
# The cup is also a league (docs/leagues.md): its "league" board ranks players in groups of 20,
# each in one tier; at every reset the top 20% of each group move up a tier, the bottom 20%
# down. Its rewards go by rank within the group: every group's winner gets a chest, gold's
# podium more.
DEMO_LEAGUE_BOARD = "league"
DEMO_LEAGUE_TIERS = ("bronze", "silver", "gold")
DEMO_LEAGUE_COHORT = 20
DEMO_LEAGUE_PERCENT = 20
# (rank from, rank to, reward, quantity, league tier or "" for every tier)
DEMO_LEAGUE_REWARDS = ((1, 1, "Group winner's chest", 1, ""), (1, 3, "Gold chest", 3, "gold"))

# The demo webhook: every rank event of every board, POSTed to the web process's own demo
# receiver (webhooks/views.py), which checks the signatures and shows what arrived.
DEMO_WEBHOOK_NAME = "Demo receiver"


def demo_receiver_url(*, port: int, endpoint_id: int | str) -> str:
    return f"http://127.0.0.1:{port}/webhooks/demo-receiver/{endpoint_id}"


class Command(BaseCommand):
    help = (
        "Create the demo season (boards: score, kills, lap times, arena, a tournament), the "
        "demo cup (a schedule resetting every 10 minutes, with a league in bronze, silver and "
        "gold), the "
        "demo webhook (to the web process's demo receiver) and a staff user for `make run` "
        "(idempotent)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--username", default="admin")
        parser.add_argument(
            "--password-file",
            default=str(Path(settings.BASE_DIR) / ".local" / "demo-admin-password"),
            help="where the generated password is kept between runs",
        )
        parser.add_argument(
            "--web-port",
            type=int_between(1, PORT_MAX),
            default=8000,
            help="the port the web process serves (the demo webhook's receiver is there)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not Season.objects.filter(id=DEMO_SEASON_ID).exists():
            now = datetime.now(tz=UTC).replace(microsecond=0)
            season_setup(
                season_id=DEMO_SEASON_ID,
                name="Demo season",
                starts_at=now - timedelta(days=1),
                ends_at=now + timedelta(days=89),
                main_board_name="Score",
            )
            self.stdout.write(f"created demo season {DEMO_SEASON_ID}")
        for slug, name, order, rule, metadata, tiebreaks in DEMO_BOARDS:
            if not Board.objects.filter(season_id=DEMO_SEASON_ID, slug=slug).exists():
                board_create(
                    season_id=DEMO_SEASON_ID,
                    slug=slug,
                    name=name,
                    order=order,
                    rule=rule,
                    keeps_metadata=metadata,
                    tiebreaks=tiebreaks,
                )
                self.stdout.write(f"created demo board {slug}")
        slug, name = DEMO_TOURNAMENT
        if not Board.objects.filter(season_id=DEMO_SEASON_ID, slug=slug).exists():
            board_create(
                season_id=DEMO_SEASON_ID,
                slug=slug,
                name=name,
                join_required=True,
                max_size=DEMO_TOURNAMENT_SEATS,
                max_attempts=DEMO_TOURNAMENT_ATTEMPTS,
            )
            self.stdout.write(f"created demo tournament board {slug}")

        self._demo_cup()
        self._demo_webhook(port=options["web_port"])

        password_file = Path(options["password_file"])
        if password_file.exists():
            password = password_file.read_text().strip()
        else:
            password = secrets.token_urlsafe(12)
            password_file.parent.mkdir(parents=True, exist_ok=True)
            password_file.write_text(password + "\n")
            password_file.chmod(0o600)

        user_model = get_user_model()
        user, _ = user_model.objects.get_or_create(username=options["username"])
        user.is_staff = True
        user.is_superuser = True
        user.set_password(password)
        user.save()
        self.stdout.write(
            self.style.SUCCESS(
                f"staff user: {options['username']} / {password}  (admin at /admin/; "
                f"password kept in {password_file})"
            )
        )

    def _demo_cup(self) -> None:
        now = datetime.now(tz=UTC).replace(microsecond=0)
        if not Season.objects.filter(id=DEMO_CUP_TEMPLATE_ID).exists():
            # Only a template: its window has passed, so the close-out closes it (empty) and
            # it takes no result; each cup season copies its board and tiers.
            season_setup(
                season_id=DEMO_CUP_TEMPLATE_ID,
                name="Demo cup (template)",
                starts_at=now - timedelta(days=2),
                ends_at=now - timedelta(days=1),
                main_board_name="Cup points",
            )
            self.stdout.write(f"created the demo cup's template season {DEMO_CUP_TEMPLATE_ID}")
        template = Season.objects.get(id=DEMO_CUP_TEMPLATE_ID)
        # A template the close-out has closed takes no new board or tier (a demo database made
        # before the cup had its league keeps the cup as it was: `make services-stop` and
        # removing `.local/` start the demo afresh).
        editable = template.status != SeasonStatus.CLOSED
        if (
            editable
            and not RewardTier.objects.filter(
                season_id=DEMO_CUP_TEMPLATE_ID, board__slug=MAIN_BOARD
            ).exists()
        ):
            for rank_from, rank_to, reward in DEMO_CUP_TIERS:
                reward_tier_create(
                    season_id=DEMO_CUP_TEMPLATE_ID,
                    rank_from=rank_from,
                    rank_to=rank_to,
                    reward_name=reward,
                )
        if (
            editable
            and not Board.objects.filter(
                season_id=DEMO_CUP_TEMPLATE_ID, slug=DEMO_LEAGUE_BOARD
            ).exists()
        ):
            board_create(
                season_id=DEMO_CUP_TEMPLATE_ID,
                slug=DEMO_LEAGUE_BOARD,
                name="League points",
                cohort_size=DEMO_LEAGUE_COHORT,
            )
            self.stdout.write("created the demo league's board on the cup's template")
        league_board = Board.objects.filter(season_id=DEMO_CUP_TEMPLATE_ID, slug=DEMO_LEAGUE_BOARD)
        league = league_board.exists()
        if not Schedule.objects.filter(slug=DEMO_CUP).exists():
            # From ten minutes ago: the occurrence running now is the first, created at once.
            schedule_create(
                slug=DEMO_CUP,
                name="Demo cup",
                cron="*/10 * * * *",
                template_season_id=DEMO_CUP_TEMPLATE_ID,
                lead_minutes=5,
                starts_from=now - timedelta(minutes=10),
                tiers=DEMO_LEAGUE_TIERS if league else (),
                promote_percent=DEMO_LEAGUE_PERCENT if league else 0,
                relegate_percent=DEMO_LEAGUE_PERCENT if league else 0,
            )
            self.stdout.write(f"created the demo schedule {DEMO_CUP} (every 10 minutes)")
        cup = Schedule.objects.get(slug=DEMO_CUP)
        if not cup.tiers and league:
            # A demo made before the cup was a league becomes one from its next season.
            schedule_league_set(
                schedule_id=cup.id,
                tiers=DEMO_LEAGUE_TIERS,
                promote_percent=DEMO_LEAGUE_PERCENT,
                relegate_percent=DEMO_LEAGUE_PERCENT,
            )
        if (
            editable
            and league
            and not RewardTier.objects.filter(
                season_id=DEMO_CUP_TEMPLATE_ID, board__slug=DEMO_LEAGUE_BOARD
            ).exists()
        ):
            for rank_from, rank_to, reward, quantity, league_tier in DEMO_LEAGUE_REWARDS:
                reward_tier_create(
                    season_id=DEMO_CUP_TEMPLATE_ID,
                    rank_from=rank_from,
                    rank_to=rank_to,
                    reward_name=reward,
                    quantity=quantity,
                    board_slug=DEMO_LEAGUE_BOARD,
                    league_tier=league_tier,
                )
        # Its season running now at once, not at beat's first run.
        schedules_advance()

    def _demo_webhook(self, *, port: int) -> None:
        endpoint = WebhookEndpoint.objects.filter(name=DEMO_WEBHOOK_NAME).first()
        try:
            if endpoint is None:
                # Its URL names its own id: registered first, pointed at itself after.
                endpoint, _ = webhook_endpoint_create(
                    url=demo_receiver_url(port=port, endpoint_id="new"), name=DEMO_WEBHOOK_NAME
                )
                self.stdout.write(f"registered the demo webhook (endpoint {endpoint.id})")
            # Again on every run: `make run` may serve another PORT this time.
            webhook_endpoint_url_set(
                endpoint_id=endpoint.id, url=demo_receiver_url(port=port, endpoint_id=endpoint.id)
            )
        except ValidationError as exc:
            # WEBHOOK_ALLOW_PRIVATE off (`make run` turns it on): no webhook to loopback.
            self.stdout.write(f"demo webhook not registered: {'; '.join(exc.messages)}")
