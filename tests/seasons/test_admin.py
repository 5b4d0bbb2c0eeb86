from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from closeout.models import RewardGrant, RewardTier
from closeout.services import reward_tier_create, season_close
from leaderboard import keys
from leaderboard.models import Board, MatchResult
from seasons.models import Season, SeasonStatus
from tests.factories import MatchResultFactory, SeasonFactory
from tests.helpers import as_board, main_board_id, mark_intact

START = datetime(2026, 10, 1, tzinfo=UTC)
SEASONS = "/admin/seasons/season/"


@pytest.fixture
def outsider(client: Client) -> Client:
    user = get_user_model().objects.create_user("player", "p@example.com", "pw")
    client.force_login(user)
    return client


@pytest.fixture
def season(board_redis) -> Season:
    season = SeasonFactory.create(
        starts_at=START, ends_at=START + timedelta(days=30), status=SeasonStatus.ACTIVE
    )
    codec = as_board(season).codec
    for player, points, seconds in [(11, 40, 7), (12, 90, 3), (13, 40, 2)]:
        MatchResultFactory.create(
            season=season,
            player_id=player,
            points=points,
            achieved_at=START + timedelta(seconds=seconds),
        )
        board_redis.zadd(
            keys.board(board_id=main_board_id(season.id)),
            {str(player): codec.encode(points=points, elapsed_ticks=seconds)},
        )
    reward_tier_create(season_id=season.id, rank_from=1, rank_to=2, reward_name="gems")
    return season


def boards_unchanged(season: Season) -> dict[str, str]:
    """The boards inline of the season page, posted back as it was rendered."""
    data = {
        "boards-TOTAL_FORMS": "0",
        "boards-INITIAL_FORMS": "0",
        "boards-MIN_NUM_FORMS": "0",
        "boards-MAX_NUM_FORMS": "1000",
    }
    boards = Board.objects.filter(season=season).order_by("id")
    for index, board in enumerate(boards):
        data |= {
            f"boards-{index}-{name}": str(value)
            for name, value in {
                "id": board.id,
                "season": season.id,
                "slug": board.slug,
                "name": board.name,
                "order": board.order,
                "rule": board.rule,
                "time_resolution_seconds": board.time_resolution_seconds,
                "event_top_n": board.event_top_n,
                # A ticked box is posted as "on"; an unticked one is not posted at all.
                **({"rank_events": "on"} if board.rank_events else {}),
            }.items()
        }
    data["boards-TOTAL_FORMS"] = data["boards-INITIAL_FORMS"] = str(len(boards))
    return data


def tiers_posted(season: Season, *rows: dict[str, object]) -> dict[str, str]:
    """The season's change page posted with its one stored tier as it is and ``rows`` added."""
    tier = RewardTier.objects.get(season=season)
    data = {
        "name": season.name,
        **boards_unchanged(season),
        "ends_at_0": "2026-10-31",
        "ends_at_1": "00:00:00",
        "reward_tiers-TOTAL_FORMS": str(1 + len(rows)),
        "reward_tiers-INITIAL_FORMS": "1",
        "reward_tiers-MIN_NUM_FORMS": "0",
        "reward_tiers-MAX_NUM_FORMS": "1000",
        "reward_tiers-0-id": str(tier.id),
        "reward_tiers-0-season": str(season.id),
        "reward_tiers-0-rank_from": str(tier.rank_from),
        "reward_tiers-0-rank_to": str(tier.rank_to),
        "reward_tiers-0-reward_name": tier.reward_name,
        "reward_tiers-0-quantity": str(tier.quantity),
    }
    for index, row in enumerate(rows, start=1):
        data[f"reward_tiers-{index}-season"] = str(season.id)
        data |= {f"reward_tiers-{index}-{name}": str(value) for name, value in row.items()}
    return data


def run_action(client: Client, action: str, season: Season, *, confirmed: bool):
    data = {"action": action, ACTION_CHECKBOX_NAME: [str(season.id)]}
    if confirmed:
        data["confirmed"] = "yes"
    return client.post(SEASONS, data, follow=confirmed)


@pytest.mark.django_db
def test_season_pages_show_the_live_board(staff: Client, season: Season) -> None:
    mark_intact(season)
    assert staff.get(SEASONS).status_code == 200
    page = staff.get(f"{SEASONS}{season.id}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Live boards (Redis)" in html
    assert "3 players" in html
    assert "never (no snapshot)" in html
    # The live top 100, best first, decoded from the board.
    rows = [
        "<td>1</td><td>12</td><td>90</td>",
        "<td>2</td><td>13</td><td>40</td>",
        "<td>3</td><td>11</td><td>40</td>",
    ]
    positions = [html.index(row) for row in rows]
    assert positions == sorted(positions)
    assert 'value="gems"' in html  # the tier inline
    assert staff.get(f"{SEASONS}add/").status_code == 200

    from leaderboard.services import top_snapshot_refresh
    from seasons.selectors import SeasonRef

    top_snapshot_refresh(board=as_board(SeasonRef.from_model(season)))
    html = staff.get(f"{SEASONS}{season.id}/change/").content.decode()
    assert "never (no snapshot)" not in html
    assert f"{datetime.now(tz=UTC):%Y-%m-%d}" in html


@pytest.mark.django_db
def test_close_action_asks_then_closes(
    staff: Client, season: Season, settings, drained_match_results
) -> None:
    settings.SEASON_CLOSE_GRACE_SECONDS = 0
    confirm = run_action(staff, "close_season", season, confirmed=False)
    assert confirm.status_code == 200
    assert "Close out the selected seasons" in confirm.content.decode()
    assert Season.objects.get(id=season.id).status == SeasonStatus.ACTIVE

    done = run_action(staff, "close_season", season, confirmed=True)
    assert done.status_code == 200
    # (The admin capitalises messages.)
    assert (
        f"Season {season.id} closed: 3 final standings, 2 reward grants, 1 Redis keys unlinked"
        in done.content.decode()
    )
    assert Season.objects.get(id=season.id).status == SeasonStatus.CLOSED
    again = run_action(staff, "close_season", season, confirmed=True)
    assert "already closed: nothing granted" in again.content.decode()
    assert RewardGrant.objects.filter(season=season).count() == 2


@pytest.mark.django_db
def test_transition_actions_report_refusals(staff: Client, season: Season) -> None:
    page = run_action(staff, "make_active", season, confirmed=True)
    # Already active: a no-op transition succeeds.
    assert f"Season {season.id} is active" in page.content.decode()
    page = run_action(staff, "make_closing", season, confirmed=True)
    assert f"Season {season.id} is closing" in page.content.decode()
    Season.objects.filter(id=season.id).update(status=SeasonStatus.CLOSED)
    page = run_action(staff, "make_active", season, confirmed=True)
    assert f"Season {season.id}: season {season.id} cannot go from closed" in (
        page.content.decode()
    )


# The rebuild reads PostgreSQL on connections of its own: the data must be committed.
@pytest.mark.django_db(transaction=True)
def test_rebuild_action_rebuilds_the_board(staff: Client, season: Season, board_redis) -> None:
    from leaderboard_project.celery import app

    board = keys.board(board_id=main_board_id(season.id))
    board_redis.delete(board)
    app.conf.task_always_eager = True  # the queued rebuild runs inline, no worker needed
    try:
        page = run_action(staff, "rebuild_board", season, confirmed=True)
    finally:
        app.conf.task_always_eager = False
    assert f"Season {season.id}: rebuild of 1 board(s) with their daily and weekly" in (
        page.content.decode()
    )
    assert [m.decode() for m in board_redis.zrevrange(board, 0, -1)] == ["12", "13", "11"]


@pytest.mark.django_db(transaction=True)
def test_reconcile_action_queues_each_boards_reconcile_and_the_worker_repairs_drift(
    staff: Client, season: Season, board_redis, monkeypatch
) -> None:
    from leaderboard.models import ReconcileRun
    from leaderboard.tasks import board_reconcile_task
    from leaderboard_project.celery import app

    board_id = main_board_id(season.id)
    board = keys.board(board_id=board_id)
    board_redis.zrem(board, "12")  # drift: a player PostgreSQL counts is missing
    queued: list[dict[str, int]] = []
    monkeypatch.setattr(board_reconcile_task, "delay", lambda **kwargs: queued.append(kwargs))
    page = run_action(staff, "reconcile_boards", season, confirmed=True)
    assert f"Season {season.id}: reconcile of 1 board(s) queued" in page.content.decode()
    # Queued, not run in the request (a repair is a rebuild: a minute at ten million players).
    assert queued == [{"board_id": board_id}]
    assert not ReconcileRun.objects.exists()

    app.conf.task_always_eager = True  # the queued task runs inline, no worker needed
    try:
        assert "drift found" in board_reconcile_task.apply(kwargs=queued[0]).get()
    finally:
        app.conf.task_always_eager = False
    assert [m.decode() for m in board_redis.zrevrange(board, 0, -1)] == ["12", "13", "11"]


@pytest.mark.django_db
def test_overlapping_tiers_are_refused_in_the_form(staff: Client, season: Season) -> None:
    data = tiers_posted(
        season, {"rank_from": 2, "rank_to": 5, "reward_name": "coins", "quantity": 3}
    )
    page = staff.post(f"{SEASONS}{season.id}/change/", data)
    assert page.status_code == 200
    assert "ranks 2-5 overlap the tier 1-2 (gems)" in page.content.decode()
    assert RewardTier.objects.filter(season=season).count() == 1

    # Two new tiers overlapping each other (neither overlaps what is stored yet).
    data["reward_tiers-1-rank_from"] = "3"
    data |= {
        "reward_tiers-TOTAL_FORMS": "3",
        "reward_tiers-2-season": str(season.id),
        "reward_tiers-2-rank_from": "5",
        "reward_tiers-2-rank_to": "8",
        "reward_tiers-2-reward_name": "dust",
        "reward_tiers-2-quantity": "1",
    }
    page = staff.post(f"{SEASONS}{season.id}/change/", data)
    assert page.status_code == 200
    assert "tiers 3-5 and 5-8 overlap: a rank has one tier" in page.content.decode()
    assert RewardTier.objects.filter(season=season).count() == 1
    data["reward_tiers-2-rank_from"] = "6"

    page = staff.post(f"{SEASONS}{season.id}/change/", data)
    assert page.status_code == 302
    assert [
        (t.rank_from, t.rank_to, t.reward_name) for t in RewardTier.objects.filter(season=season)
    ] == [(1, 2, "gems"), (3, 5, "coins"), (6, 8, "dust")]


@pytest.mark.django_db
def test_standings_and_grants_are_read_only_with_csv(
    staff: Client, season: Season, drained_match_results
) -> None:
    season_close(season_id=season.id, grace_seconds=0)
    standings = staff.get("/admin/closeout/finalstanding/")
    assert standings.status_code == 200
    assert staff.get("/admin/closeout/finalstanding/add/").status_code == 403
    grants = staff.get("/admin/closeout/rewardgrant/")
    assert grants.status_code == 200
    # Every board has its own standings and grants: each row names its board.
    for page in (standings, grants):
        assert f"(main, season {season.id})" in page.content.decode()

    ids = [str(pk) for pk in RewardGrant.objects.values_list("id", flat=True)]
    csv_response = staff.post(
        "/admin/closeout/rewardgrant/", {"action": "export_csv", ACTION_CHECKBOX_NAME: ids}
    )
    assert csv_response["Content-Type"] == "text/csv"
    lines = csv_response.content.decode().splitlines()
    assert lines[0] == "season_id,board,rank,player_id,reward_name,quantity,status,created_at"
    assert [line.split(",")[:7] for line in lines[1:]] == [
        [str(season.id), "main", "1", "12", "gems", "1", "pending"],
        [str(season.id), "main", "2", "13", "gems", "1", "pending"],
    ]
    standing_ids = [str(pk) for pk in season.final_standings.values_list("id", flat=True)]
    csv_response = staff.post(
        "/admin/closeout/finalstanding/",
        {"action": "export_csv", ACTION_CHECKBOX_NAME: standing_ids},
    )
    assert csv_response.content.decode().splitlines() == [
        "season_id,board,rank,player_id,points,reached_at,attempts",
        # The board has no max-attempts: no count.
        f"{season.id},main,1,12,90,2026-10-01 00:00:03+00:00,",
        f"{season.id},main,2,13,40,2026-10-01 00:00:02+00:00,",
        f"{season.id},main,3,11,40,2026-10-01 00:00:07+00:00,",
    ]

    # Staff change a grant's status, and only that.
    grant = RewardGrant.objects.get(player_id=12)
    page = staff.post(f"/admin/closeout/rewardgrant/{grant.id}/change/", {"status": "delivered"})
    assert page.status_code == 302
    grant.refresh_from_db()
    assert (grant.status, grant.player_id, grant.rank) == ("delivered", 12, 1)


@pytest.mark.django_db
def test_non_staff_users_are_turned_away(outsider: Client, season: Season, settings) -> None:
    settings.SEASON_CLOSE_GRACE_SECONDS = 0
    for url in (
        SEASONS,
        f"{SEASONS}{season.id}/change/",
        "/admin/closeout/finalstanding/",
        "/admin/closeout/rewardgrant/",
    ):
        response = outsider.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/admin/login/")
    response = run_action(outsider, "close_season", season, confirmed=False)
    assert response.status_code == 302
    response = outsider.post(
        SEASONS,
        {"action": "close_season", ACTION_CHECKBOX_NAME: [str(season.id)], "confirmed": "yes"},
    )
    assert response.status_code == 302
    assert Season.objects.get(id=season.id).status == SeasonStatus.ACTIVE


@pytest.mark.django_db
def test_staff_without_permissions_get_403(client: Client, season: Season) -> None:
    user = get_user_model().objects.create_user("intern", "i@example.com", "pw", is_staff=True)
    client.force_login(user)
    assert client.get(SEASONS).status_code == 403
    response = client.post(
        SEASONS,
        {"action": "close_season", ACTION_CHECKBOX_NAME: [str(season.id)], "confirmed": "yes"},
    )
    assert response.status_code == 403
    assert Season.objects.get(id=season.id).status == SeasonStatus.ACTIVE


@pytest.mark.django_db
def test_editing_a_season_saves_what_the_form_changed(staff: Client, season: Season) -> None:
    recorded = {"topic": "t", "recorded_at": "2026-10-31T00:00:00+00:00", "partitions": {"0": 3}}
    Season.objects.filter(id=season.id).update(drain_end_offsets=recorded)
    data = tiers_posted(season) | {"name": "Renamed", "ends_at_0": "2026-11-02"}
    page = staff.post(f"{SEASONS}{season.id}/change/", data)
    assert page.status_code == 302, page.content.decode()[:2000]
    saved = Season.objects.get(id=season.id)
    assert (saved.name, saved.ends_at.date().isoformat()) == ("Renamed", "2026-11-02")
    assert (saved.status, saved.drain_end_offsets) == (SeasonStatus.ACTIVE, recorded)


@pytest.mark.django_db
def test_a_new_tier_row_offers_only_the_seasons_boards(staff: Client, season: Season) -> None:
    """The empty row of the tiers inline: its instance has no season while the form is built,
    so on its own it listed every season's boards."""
    other = SeasonFactory.create(starts_at=START, ends_at=START + timedelta(days=30))
    foreign = Board.objects.filter(season=other).first()
    own = Board.objects.filter(season=season).first()
    assert foreign is not None
    assert own is not None
    html = staff.get(f"{SEASONS}{season.id}/change/").content.decode()
    start = html.index('name="reward_tiers-1-board"')
    row = html[start : html.index("</select>", start)]
    assert f'value="{own.id}"' in row
    assert f'value="{foreign.id}"' not in row

    # Nor may a posted row name another season's board.
    data = tiers_posted(
        season,
        {"board": foreign.id, "rank_from": 5, "rank_to": 6, "reward_name": "coins", "quantity": 1},
    )
    page = staff.post(f"{SEASONS}{season.id}/change/", data)
    assert page.status_code == 200
    assert "Select a valid choice" in page.content.decode()
    assert RewardTier.objects.filter(season=season).count() == 1


def _result_rows_read(queries: list[dict[str, str]]) -> list[str]:
    """The queries that read match result rows (an EXISTS probe reads at most one)."""
    return [
        q["sql"]
        for q in queries
        if 'FROM "ingestion_matchresult"' in q["sql"] and "LIMIT 1" not in q["sql"]
    ]


@pytest.mark.django_db
def test_a_season_with_results_is_refused_deletion_without_loading_them(
    staff: Client, season: Season
) -> None:
    with CaptureQueriesContext(connection) as page_queries:
        page = staff.get(f"{SEASONS}{season.id}/delete/")
    assert page.status_code == 200
    text = page.content.decode()
    assert f"Season {season.id} has match results and cannot be deleted" in text
    assert _result_rows_read(page_queries.captured_queries) == []

    with CaptureQueriesContext(connection) as post_queries:
        staff.post(f"{SEASONS}{season.id}/delete/", {"post": "yes"})
    assert _result_rows_read(post_queries.captured_queries) == []
    # The list's bulk delete is refused the same way.
    bulk = staff.post(
        SEASONS,
        {"action": "delete_selected", ACTION_CHECKBOX_NAME: [str(season.id)], "post": "yes"},
    )
    assert "has match results and cannot be deleted" in bulk.content.decode()
    assert Season.objects.filter(id=season.id).exists()
    assert MatchResult.objects.filter(season_id=season.id).count() == 3


@pytest.mark.django_db
def test_a_closed_season_is_refused_deletion_and_an_unplayed_one_is_deleted(
    staff: Client, board_redis
) -> None:
    closed = SeasonFactory.create(
        starts_at=START, ends_at=START + timedelta(days=1), status=SeasonStatus.CLOSED
    )
    page = staff.post(f"{SEASONS}{closed.id}/delete/", {"post": "yes"})
    assert f"Season {closed.id} is closed" in page.content.decode()
    assert Season.objects.filter(id=closed.id).exists()

    unplayed = SeasonFactory.create(
        starts_at=START, ends_at=START + timedelta(days=1), status=SeasonStatus.SCHEDULED
    )
    done = staff.post(f"{SEASONS}{unplayed.id}/delete/", {"post": "yes"})
    assert done.status_code == 302
    assert not Season.objects.filter(id=unplayed.id).exists()
