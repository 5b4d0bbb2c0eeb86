"""The admin's lists of records that grow with play (results, runs, standings, grants, bans,
participants, kept webhook batches) read their related rows with the page, not one query per
row: the queries of a list page do not grow with its rows; and the lists of tables of millions
of rows never count the whole table (seasons.admin.EstimatedCountPaginator)."""

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
from players.models import PlayerProfile
from seasons.admin import EstimatedCountPaginator
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
    "players/playerprofile": lambda s: PlayerProfile.objects.create(
        player_id=next(_ids), display_name="x", name_updated_at=NOW
    ),
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


# The lists of tables that reach millions of rows (LargeTableAdmin).
LARGE = (
    "closeout/finalstanding",
    "closeout/rewardgrant",
    "leaderboard/matchresult",
    "leaderboard/participant",
    "players/playerprofile",
)


@pytest.mark.parametrize("path", LARGE)
def test_a_large_list_counts_at_most_its_limit_and_asks_the_planner_past_it(
    staff: Client, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(EstimatedCountPaginator, "exact_limit", 2)
    for _ in range(4):
        ROWS[path](SeasonFactory.create())
    with CaptureQueriesContext(connection) as captured:
        page = staff.get(f"/admin/{path}/")
    assert page.status_code == 200
    counts = [query["sql"] for query in captured if "COUNT(" in query["sql"].upper()]
    assert counts, "the page counted nothing"
    # Each count reads at most limit + 1 rows: never the whole table.
    assert all("LIMIT 3" in sql for sql in counts), counts
    assert any(query["sql"].startswith("EXPLAIN") for query in captured)
    assert page.context["cl"].result_count >= 3


def test_a_large_list_below_its_limit_is_counted_exactly(staff: Client) -> None:
    seasons = [SeasonFactory.create() for _ in range(3)]
    for season in seasons:
        ROWS["closeout/finalstanding"](season)
    page = staff.get("/admin/closeout/finalstanding/")
    assert page.context["cl"].result_count == 3
    filtered = staff.get(f"/admin/closeout/finalstanding/?season__id__exact={seasons[0].pk}")
    assert filtered.context["cl"].result_count == 1


# Lists searched by player id on tables whose indexes lead with the board.
BY_PLAYER = ("closeout/finalstanding", "closeout/rewardgrant", "leaderboard/participant")


@pytest.mark.parametrize("path", BY_PLAYER)
def test_a_player_id_search_names_every_board_so_the_board_player_index_serves_it(
    staff: Client, path: str
) -> None:
    for _ in range(3):
        ROWS[path](SeasonFactory.create())
    wanted = next(_ids) - 2  # the second row's player
    with CaptureQueriesContext(connection) as captured:
        page = staff.get(f"/admin/{path}/", {"q": str(wanted)})
    assert page.status_code == 200
    assert [row.player_id for row in page.context["cl"].result_list] == [wanted]
    searched = [q["sql"] for q in captured if f'player_id" = {wanted}' in q["sql"]]
    assert searched
    assert all('"board_id" IN (' in sql for sql in searched), searched
    # The page's order is the table's own columns: no join of the seasons to sort it.
    listed = [sql for sql in searched if "ORDER BY" in sql]
    assert listed
    assert all("starts_at" not in sql.split("ORDER BY")[1] for sql in listed), listed
