"""Boards inline on the season's admin page: created through the service, frozen once scored."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from leaderboard.models import Board, Cohort
from leaderboard.services import ResultColumns, ResultRow, board_update, match_results_store
from seasons.models import Season
from tests.factories import MatchResultFactory, SeasonFactory, board_factory

START = datetime(2026, 10, 1, tzinfo=UTC)
SEASONS = "/admin/seasons/season/"

pytestmark = pytest.mark.django_db


def _management(prefix: str, total: int, initial: int) -> dict[str, str]:
    return {
        f"{prefix}-TOTAL_FORMS": str(total),
        f"{prefix}-INITIAL_FORMS": str(initial),
        f"{prefix}-MIN_NUM_FORMS": "0",
        f"{prefix}-MAX_NUM_FORMS": "1000",
    }


def _board_row(index: int, **fields: Any) -> dict[str, str]:
    """A board row as the browser posts it: the rank events options at their initial values
    unless given (``rank_events=False``: the box unticked, not posted)."""
    fields = {"rank_events": True, "event_top_n": 100, **fields}
    if fields["rank_events"] is False:
        del fields["rank_events"]
    else:
        fields["rank_events"] = "on"
    return {f"boards-{index}-{name}": str(value) for name, value in fields.items()}


def _post_main_board(staff: Client, season: Season, main: Board, **fields: Any) -> None:
    """Save the season's change page with its one board row (main) set to ``fields``."""
    data = {
        "name": season.name,
        "ends_at_0": "2026-10-31",
        "ends_at_1": "00:00:00",
        **_management("boards", 1, 1),
        **_board_row(0, id=main.id, season=season.id, slug="main", **fields),
        **_management("reward_tiers", 0, 0),
    }
    page = staff.post(f"{SEASONS}{season.id}/change/", data)
    assert page.status_code == 302, page.content.decode()[:2000]


def test_a_season_added_with_a_board_gets_it_and_its_main_board(staff: Client) -> None:
    data = {
        "id": "501",
        "name": "Added",
        "starts_at_0": "2026-10-01",
        "starts_at_1": "00:00:00",
        "ends_at_0": "2026-12-30",
        "ends_at_1": "00:00:00",
        **_management("boards", 1, 0),
        **_board_row(
            0,
            slug="lap-times",
            name="Lap times",
            order="asc",
            rule="best",
            time_resolution_seconds=1,
        ),
        **_management("reward_tiers", 0, 0),
    }
    page = staff.post(f"{SEASONS}add/", data)
    assert page.status_code == 302, page.content.decode()[:2000]
    boards = {b.slug: b for b in Board.objects.filter(season_id=501)}
    assert set(boards) == {"main", "lap-times"}
    lap = boards["lap-times"]
    assert (lap.order, lap.rule) == ("asc", "best")
    # The codec split was fixed by the service: 90 days at one second need 23 time bits.
    assert lap.time_bits == 23


def test_a_season_added_with_a_reward_tier_and_no_board_pays_its_main_board(staff: Client) -> None:
    """A tier left without a board ("empty: the main board") on a season being added: its main
    board is made only on save (an IntegrityError, a 500, before)."""
    data = {
        "id": "502",
        "name": "Added with a tier",
        "starts_at_0": "2026-10-01",
        "starts_at_1": "00:00:00",
        "ends_at_0": "2026-12-30",
        "ends_at_1": "00:00:00",
        **_management("boards", 0, 0),
        **_management("reward_tiers", 1, 0),
        "reward_tiers-0-rank_from": "1",
        "reward_tiers-0-rank_to": "3",
        "reward_tiers-0-reward_name": "crown",
        "reward_tiers-0-quantity": "1",
    }
    page = staff.post(f"{SEASONS}add/", data)
    assert page.status_code == 302, page.content.decode()[:2000]
    main = Board.objects.get(season_id=502, slug="main")
    assert list(main.reward_tiers.values_list("rank_from", "rank_to", "reward_name")) == [
        (1, 3, "crown")
    ]


def test_score_fields_are_read_only_once_the_board_has_results(staff: Client) -> None:
    season: Season = SeasonFactory.create(starts_at=START, ends_at=START + timedelta(days=30))
    main = Board.objects.get(season=season, slug="main")
    rule = re.compile(r'<select name="boards-0-rule"[^>]*>')
    html = staff.get(f"{SEASONS}{season.id}/change/").content.decode()
    assert "disabled" not in rule.search(html).group(0)  # type: ignore[union-attr]

    MatchResultFactory.create(season=season, player_id=1, points=5)
    html = staff.get(f"{SEASONS}{season.id}/change/").content.decode()
    assert "disabled" in rule.search(html).group(0)  # type: ignore[union-attr]
    # A post that tries to change the rule anyway changes nothing (disabled fields keep their
    # initial value).
    _post_main_board(
        staff, season, main, name="Renamed", order="asc", rule="cumulative",
        time_resolution_seconds=60,
    )  # fmt: skip
    main.refresh_from_db()
    assert (main.name, main.order, main.rule, main.time_resolution_seconds) == (
        "Renamed",
        "desc",
        "best",
        1,
    )


def test_rank_events_options_change_in_the_admin_even_once_the_board_has_results(
    staff: Client,
) -> None:
    season: Season = SeasonFactory.create(starts_at=START, ends_at=START + timedelta(days=30))
    main = Board.objects.get(season=season, slug="main")
    assert (main.rank_events, main.event_top_n) == (True, 100)
    MatchResultFactory.create(season=season, player_id=1, points=5)
    _post_main_board(
        staff, season, main, name="Main", order="desc", rule="best", time_resolution_seconds=1,
        rank_events=False, event_top_n=10,
    )  # fmt: skip
    main.refresh_from_db()
    assert (main.rank_events, main.event_top_n) == (False, 10)
    data = {
        "name": season.name,
        "ends_at_0": "2026-10-31",
        "ends_at_1": "00:00:00",
        **_management("boards", 1, 1),
        **_board_row(0, id=main.id, season=season.id, slug="main", name="Main", event_top_n=0),
        **_management("reward_tiers", 0, 0),
    }
    page = staff.post(f"{SEASONS}{season.id}/change/", data)
    assert page.status_code == 200  # refused, with the reason on the page
    main.refresh_from_db()
    assert main.event_top_n == 10


def test_keeping_metadata_is_chosen_in_the_admin_and_fixed_once_the_board_has_results(
    staff: Client,
) -> None:
    season: Season = SeasonFactory.create(starts_at=START, ends_at=START + timedelta(days=30))
    main = Board.objects.get(season=season, slug="main")
    checkbox = re.compile(r'<input type="checkbox" name="boards-0-keeps_metadata"[^>]*>')

    def post(*, keeps: bool) -> None:
        # An unticked checkbox is left out of the form's data.
        ticked = {"keeps_metadata": "on"} if keeps else {}
        _post_main_board(
            staff, season, main, name="Main", order="desc", rule="best",
            time_resolution_seconds=1, **ticked,
        )  # fmt: skip

    post(keeps=True)
    main.refresh_from_db()
    assert main.keeps_metadata

    MatchResultFactory.create(season=season, player_id=1, points=5)
    html = staff.get(f"{SEASONS}{season.id}/change/").content.decode()
    assert "disabled" in checkbox.search(html).group(0)  # type: ignore[union-attr]
    post(keeps=False)
    main.refresh_from_db()
    assert main.keeps_metadata


def test_tie_break_columns_are_written_as_create_boards_arguments_and_fixed_once_scored(
    staff: Client,
) -> None:
    from leaderboard.models import TiebreakColumn

    season: Season = SeasonFactory.create(starts_at=START, ends_at=START + timedelta(days=30))
    main = Board.objects.get(season=season, slug="main")
    field = re.compile(r'<input type="text" name="boards-0-tiebreak_columns"[^>]*>')

    def post(columns: str, *, expect_saved: bool = True) -> str:
        data = {
            "name": season.name,
            "ends_at_0": "2026-10-31",
            "ends_at_1": "00:00:00",
            **_management("boards", 1, 1),
            **_board_row(
                0,
                id=main.id,
                season=season.id,
                slug="main",
                name="Main",
                order="desc",
                rule="best",
                time_resolution_seconds=1,
                tiebreak_columns=columns,
            ),
            **_management("reward_tiers", 0, 0),
        }
        page = staff.post(f"{SEASONS}{season.id}/change/", data)
        assert (page.status_code == 302) == expect_saved, page.content.decode()[:2000]
        return page.content.decode()

    post("kills:desc, deaths:asc")
    main.refresh_from_db()
    assert main.tiebreaks == (TiebreakColumn("kills", "desc"), TiebreakColumn("deaths", "asc"))
    html = staff.get(f"{SEASONS}{season.id}/change/").content.decode()
    assert 'value="kills:desc, deaths:asc"' in field.search(html).group(0)  # type: ignore[union-attr]

    refused = post("kills:sideways", expect_saved=False)
    assert "order must be asc or desc" in refused
    refused = post("a:asc, b:asc, c:asc, d:asc", expect_saved=False)
    assert "at most 3 tie-break columns" in refused

    MatchResultFactory.create(season=season, player_id=1, points=5, tiebreakers=[1, 2])
    html = staff.get(f"{SEASONS}{season.id}/change/").content.decode()
    assert "disabled" in field.search(html).group(0)  # type: ignore[union-attr]
    post("")
    main.refresh_from_db()
    assert main.tiebreak_names == ("kills", "deaths")


def test_cohorts_are_chosen_on_the_board_row_and_listed_with_their_fill(staff: Client) -> None:
    season: Season = SeasonFactory.create(starts_at=START, ends_at=START + timedelta(days=30))
    main = Board.objects.get(season=season, slug="main")
    _post_main_board(
        staff, season, main, name="Main", order="desc", rule="best",
        time_resolution_seconds=1, cohort_size=2,
    )  # fmt: skip
    main.refresh_from_db()
    assert main.cohort_size == 2
    rows = [
        ResultRow(uuid.uuid4(), player, season.id, main.id, 5, START + timedelta(hours=1), 0, i)
        for i, player in enumerate([41, 42, 43])
    ]
    match_results_store(results=ResultColumns.of(rows))
    html = staff.get(f"{SEASONS}{season.id}/change/").content.decode()
    assert "2 (3 players; newest 1/2)" in html
    listing = staff.get("/admin/leaderboard/cohort/").content.decode()
    assert "2/2" in listing
    assert "1/2" in listing
    with CaptureQueriesContext(connection) as captured:
        found = staff.get("/admin/leaderboard/cohort/?q=43").content.decode()
    assert "1/2" in found
    assert "2/2" not in found
    # Through the memberships' (board, player) index, every board named: the membership
    # table has no index of the player alone.
    searched = [q["sql"] for q in captured if "cohortmember" in q["sql"]]
    assert searched
    assert all('cohortmember"."board_id" IN (' in sql for sql in searched), searched
    first = Cohort.objects.get(board=main, number=1)
    page = staff.get(f"/admin/leaderboard/cohort/{first.id}/change/").content.decode()
    assert "41" in page
    assert "42" in page


def _delete_rows(staff: Client, season: Season, boards: list[Board]) -> Any:
    """Post the season's change page with every board row of ``boards`` marked for deletion."""
    data = {
        "name": season.name,
        "ends_at_0": "2026-10-31",
        "ends_at_1": "00:00:00",
        **_management("boards", len(boards), len(boards)),
        **_management("reward_tiers", 0, 0),
    }
    for index, board in enumerate(boards):
        data |= _board_row(
            index, id=board.id, season=season.id, slug=board.slug, name=board.name,
            order=board.order, rule=board.rule,
            time_resolution_seconds=board.time_resolution_seconds, DELETE="on",
        )  # fmt: skip
    return staff.post(f"{SEASONS}{season.id}/change/", data)


def test_a_board_with_results_is_not_deleted_and_its_results_are_not_loaded(
    staff: Client,
) -> None:
    season: Season = SeasonFactory.create(starts_at=START, ends_at=START + timedelta(days=30))
    laps = board_factory(season=season, slug="laps")
    for player in (1, 2, 3):
        MatchResultFactory.create(season=season, board=laps, player_id=player, points=5)
    with CaptureQueriesContext(connection) as captured:
        page = _delete_rows(staff, season, [laps])
    assert page.status_code == 200  # refused, with the reason on the page
    assert "Board laps has results and cannot be deleted" in page.content.decode()
    assert Board.objects.filter(id=laps.id).exists()
    # The results were only probed (one row at most), never listed.
    reads = [q["sql"] for q in captured if "matchresult" in q["sql"]]
    assert reads
    assert all("LIMIT 1" in sql for sql in reads), reads


def test_the_main_board_is_not_deleted_and_a_board_without_results_is(staff: Client) -> None:
    season: Season = SeasonFactory.create(starts_at=START, ends_at=START + timedelta(days=30))
    main = Board.objects.get(season=season, slug="main")
    spare = board_factory(season=season, slug="spare")
    page = _delete_rows(staff, season, [main])
    assert page.status_code == 200
    assert "The main board cannot be deleted" in page.content.decode()
    assert Board.objects.filter(id=main.id).exists()
    page = _delete_rows(staff, season, [spare])
    assert page.status_code == 302, page.content.decode()[:2000]
    assert set(Board.objects.filter(season=season).values_list("slug", flat=True)) == {"main"}


def _post_season(staff: Client, season: Season, *, ends_at: datetime) -> Any:
    """Save the season's change page with a new end and its board rows as they are."""
    boards = list(Board.objects.filter(season=season).order_by("id"))
    data = {
        "name": season.name,
        "ends_at_0": ends_at.date().isoformat(),
        "ends_at_1": ends_at.time().isoformat(),
        **_management("boards", len(boards), len(boards)),
        **_management("reward_tiers", 0, 0),
    }
    for index, board in enumerate(boards):
        data |= _board_row(
            index, id=board.id, season=season.id, slug=board.slug, name=board.name,
            order=board.order, rule=board.rule,
            time_resolution_seconds=board.time_resolution_seconds,
        )  # fmt: skip
    return staff.post(f"{SEASONS}{season.id}/change/", data)


def test_a_season_end_past_what_its_boards_time_bits_hold_is_refused(staff: Client) -> None:
    # 30 days at one second: 22 time bits, which hold 48.5 days from the start. A later end
    # would let a result's ticks spill into its points (a 1000 read as 999, and ranked so).
    season: Season = SeasonFactory.create(starts_at=START, ends_at=START + timedelta(days=30))
    main = Board.objects.get(season=season, slug="main")
    assert main.time_bits == 22
    page = _post_season(staff, season, ends_at=START + timedelta(days=60))
    assert page.status_code == 200
    html = page.content.decode()
    assert "board &#x27;main&#x27; counts the time of its scores in 22 bits of 1s" in html
    latest = (START + timedelta(seconds=(1 << 22) - 1)).isoformat()
    assert f"the season can end at {latest} at the latest" in html
    season.refresh_from_db()
    assert season.ends_at == START + timedelta(days=30)

    # Within what the bits hold: saved, the board unchanged.
    page = _post_season(staff, season, ends_at=START + timedelta(days=45))
    assert page.status_code == 302, page.content.decode()[:2000]
    season.refresh_from_db()
    main.refresh_from_db()
    assert (season.ends_at, main.time_bits) == (START + timedelta(days=45), 22)


def test_a_season_that_cannot_take_results_yet_refits_its_boards_to_a_later_end(
    staff: Client,
) -> None:
    starts = (datetime.now(UTC) + timedelta(days=10)).replace(microsecond=0)
    season: Season = SeasonFactory.create(starts_at=starts, ends_at=starts + timedelta(days=30))
    laps = board_factory(season=season, slug="laps", time_resolution_seconds=60)
    assert (Board.objects.get(season=season, slug="main").time_bits, laps.time_bits) == (22, 16)
    page = _post_season(staff, season, ends_at=starts + timedelta(days=60))
    assert page.status_code == 302, page.content.decode()[:2000]
    bits = dict(Board.objects.filter(season=season).values_list("slug", "time_bits"))
    # 60 days: 23 bits at one second; at a minute 86,400 ticks still fit 17.
    assert bits == {"main": 23, "laps": 17}


def test_a_closed_seasons_boards_stay_as_they_are_once_its_results_are_pruned(
    staff: Client,
) -> None:
    season: Season = SeasonFactory.create(starts_at=START, ends_at=START + timedelta(days=30))
    kills = board_factory(season=season, slug="kills")
    Season.objects.filter(id=season.id).update(status="closed")
    season.refresh_from_db()
    # No result left (pruned): only the closed season keeps the row from changing.
    html = staff.get(f"{SEASONS}{season.id}/change/").content.decode()
    assert 'name="boards-1-slug"' not in html
    assert 'name="boards-1-DELETE"' not in html
    with pytest.raises(ValidationError, match="belongs to a closed season: slug"):
        board_update(
            board_id=kills.id, name="kills", slug="renamed", order=kills.order,
            rule=kills.rule, time_resolution_seconds=kills.time_resolution_seconds,
        )  # fmt: skip
    page = _delete_rows(staff, season, [kills])
    assert Board.objects.filter(id=kills.id, slug="kills").exists(), page.status_code
