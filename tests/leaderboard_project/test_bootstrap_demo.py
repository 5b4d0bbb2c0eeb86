"""bootstrap_demo (make run's demo data): the demo cup resets every 10 minutes from its
template, with a season running as soon as it returns; the demo webhook points at the web
process's demo receiver; a second run changes nothing."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from closeout.models import RewardTier
from leaderboard.models import Board
from leaderboard_project.management.commands.bootstrap_demo import (
    DEMO_CUP,
    DEMO_CUP_TEMPLATE_ID,
    DEMO_CUP_TIERS,
    DEMO_LEAGUE_BOARD,
    DEMO_LEAGUE_REWARDS,
    DEMO_LEAGUE_TIERS,
    DEMO_SEASON_ID,
    DEMO_TOURNAMENT,
    DEMO_TOURNAMENT_ATTEMPTS,
    DEMO_TOURNAMENT_SEATS,
    DEMO_WEBHOOK_NAME,
)
from seasons.models import Schedule, Season
from webhooks.crypto import secret_decrypt
from webhooks.models import WebhookEndpoint


@pytest.mark.django_db
def test_the_demo_cup_runs_at_once_and_a_rerun_changes_nothing(tmp_path: Path) -> None:
    password = str(tmp_path / "password")
    call_command("bootstrap_demo", "--password-file", password, stdout=StringIO())
    schedule = Schedule.objects.get(slug=DEMO_CUP)
    assert (schedule.cron, schedule.template_season_id) == ("*/10 * * * *", DEMO_CUP_TEMPLATE_ID)
    now = timezone.now()
    # The one running now; in the last 5 minutes of a cup, the next one too (its lead time).
    [current] = Season.objects.filter(schedule=schedule, starts_at__lte=now, ends_at__gt=now)
    assert Season.objects.filter(schedule=schedule).count() in (1, 2)
    assert sorted(
        (t.rank_from, t.rank_to, t.reward_name)
        for t in RewardTier.objects.filter(season=current, board__slug="main")
    ) == sorted(DEMO_CUP_TIERS)
    # The cup is a league: bronze, silver, gold in groups of 20, 20% up and down at each reset,
    # its rewards by rank within each group (gold's podium more).
    assert (schedule.tiers, schedule.promote_percent, schedule.relegate_percent) == (
        list(DEMO_LEAGUE_TIERS),
        20,
        20,
    )
    league = Board.objects.get(season=current, slug=DEMO_LEAGUE_BOARD)
    assert (league.tiers, league.cohort_size) == (["bronze", "silver", "gold"], 20)
    assert sorted(
        (t.rank_from, t.rank_to, t.reward_name, t.quantity, t.league_tier)
        for t in RewardTier.objects.filter(season=current, board=league)
    ) == sorted(DEMO_LEAGUE_REWARDS)

    call_command("bootstrap_demo", "--password-file", password, stdout=StringIO())
    assert Schedule.objects.filter(slug=DEMO_CUP).count() == 1
    assert Season.objects.filter(schedule=schedule).count() in (1, 2, 3)  # resets came between
    assert RewardTier.objects.filter(season_id=DEMO_CUP_TEMPLATE_ID).count() == len(
        DEMO_CUP_TIERS
    ) + len(DEMO_LEAGUE_REWARDS)


@pytest.mark.django_db
def test_the_demo_webhook_points_at_the_demo_receiver_on_the_port_of_this_run(
    tmp_path: Path,
) -> None:
    password = str(tmp_path / "password")
    call_command("bootstrap_demo", "--password-file", password, stdout=StringIO())
    endpoint = WebhookEndpoint.objects.get(name=DEMO_WEBHOOK_NAME)
    assert endpoint.url == f"http://127.0.0.1:8000/webhooks/demo-receiver/{endpoint.id}"
    assert (endpoint.event_types, endpoint.boards, endpoint.is_active) == ([], [], True)
    secret = secret_decrypt(endpoint.secret_encrypted)

    call_command(
        "bootstrap_demo", "--password-file", password, "--web-port", "8123", stdout=StringIO()
    )
    [again] = WebhookEndpoint.objects.filter(name=DEMO_WEBHOOK_NAME)
    assert again.url == f"http://127.0.0.1:8123/webhooks/demo-receiver/{endpoint.id}"
    assert secret_decrypt(again.secret_encrypted) == secret


@pytest.mark.django_db
def test_the_demo_season_has_a_tournament_board(tmp_path: Path) -> None:
    password = str(tmp_path / "password")
    call_command("bootstrap_demo", "--password-file", password, stdout=StringIO())
    call_command("bootstrap_demo", "--password-file", password, stdout=StringIO())
    [board] = Board.objects.filter(season_id=DEMO_SEASON_ID, slug=DEMO_TOURNAMENT[0])
    assert (board.join_required, board.max_size, board.max_attempts) == (
        True,
        DEMO_TOURNAMENT_SEATS,
        DEMO_TOURNAMENT_ATTEMPTS,
    )
