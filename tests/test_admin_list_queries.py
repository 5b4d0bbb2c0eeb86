"""The admin's lists of records that grow with play (results, runs, standings, grants, bans,
participants, kept webhook batches) read their related rows with the page, not one query per
row: the queries of a list page do not grow with its rows."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from itertools import count

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from closeout.models import FinalStanding, RewardGrant
from leaderboard.models import (
    MAIN_BOARD,
    Board,
    Participant,
    PlayerBan,
    RebuildRun,
    ReconcileRun,
)
from seasons.models import Season
from tests.factories import MatchResultFactory, SeasonFactory
from webhooks.models import DeliveryStatus, WebhookDelivery
from webhooks.services import webhook_endpoint_create

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 10, 1, tzinfo=UTC)
_ids = count(1)


def _main(season: Season) -> Board:
    return Board.objects.get(season=season, slug=MAIN_BOARD)


def _standing(season: Season) -> None:
    n = next(_ids)
    FinalStanding.objects.create(
        season=season, board=_main(season), rank=n, player_id=n, points=1, reached_at=NOW
    )


def _grant(season: Season) -> None:
    n = next(_ids)
    RewardGrant.objects.create(
        season=season, board=_main(season), rank=n, player_id=n, reward_name="gems", quantity=1
    )


def _ban(season: Season) -> None:
    staff = get_user_model().objects.get(username="staff")
    PlayerBan.objects.create(season=season, player_id=next(_ids), reason="x", created_by=staff)


def _reconcile(season: Season) -> None:
    ReconcileRun.objects.create(
        season=season,
        board=_main(season),
        redis_members=0,
        expected_members=0,
        sample_size=0,
        mismatched_scores=0,
        drift_found=False,
    )


def _kept_delivery(season: Season) -> None:
    # An endpoint of its own per row, as the seasons elsewhere.
    endpoint, _ = webhook_endpoint_create(url=f"https://hooks.example.com/{next(_ids)}")
    WebhookDelivery.objects.create(
        endpoint=endpoint,
        body="[]",
        event_count=0,
        status=DeliveryStatus.FAILED,
        received_at=NOW,
        created_at=NOW,
        next_attempt_at=NOW,
        give_up_at=NOW + timedelta(hours=24),
    )


ROWS: dict[str, Callable[[Season], object]] = {
    "leaderboard/matchresult": lambda s: MatchResultFactory(season=s),
    "leaderboard/rebuildrun": lambda s: RebuildRun.objects.create(season=s, board=_main(s)),
    "leaderboard/reconcilerun": _reconcile,
    "leaderboard/playerban": _ban,
    "leaderboard/participant": lambda s: Participant.objects.create(
        board=_main(s), player_id=next(_ids)
    ),
    "closeout/finalstanding": _standing,
    "closeout/rewardgrant": _grant,
    "webhooks/webhookdelivery": _kept_delivery,
}


def _queries(staff: Client, path: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        page = staff.get(f"/admin/{path}/")
    assert page.status_code == 200, path
    return len(captured)


@pytest.mark.parametrize("path", sorted(ROWS))
def test_a_list_page_reads_as_many_queries_for_one_row_as_for_six(staff: Client, path: str) -> None:
    # Each row in a season of its own: nothing a row reads is shared with another's.
    ROWS[path](SeasonFactory.create())
    one = _queries(staff, path)
    for _ in range(5):
        ROWS[path](SeasonFactory.create())
    assert _queries(staff, path) == one
