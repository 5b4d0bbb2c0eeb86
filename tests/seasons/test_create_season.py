from __future__ import annotations

from datetime import UTC, datetime
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from leaderboard.models import Board
from seasons.models import Season


def run(*args: str) -> str:
    out = StringIO()
    call_command("create_season", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_create_season_as_in_the_contract() -> None:
    output = run(
        "--id", "12", "--name", "Season 12",
        "--starts-at", "2026-10-01T00:00:00Z", "--ends-at", "2026-12-31T00:00:00Z",
    )  # fmt: skip
    season = Season.objects.get(id=12)
    assert season.name == "Season 12"
    assert season.status == "scheduled"
    assert season.starts_at == datetime(2026, 10, 1, tzinfo=UTC)
    board = Board.objects.get(season=season)
    assert (board.slug, board.rule, board.order) == ("main", "best", "desc")
    # 91 days at one second: 7,862,400 ticks need 23 bits; points take the other 30.
    assert (board.codec.points_bits, board.codec.time_bits) == (30, 23)
    assert "created season 12" in output


@pytest.mark.django_db
def test_cumulative_rule_and_resolution() -> None:
    run(
        "--id", "13", "--name", "S13", "--rule", "cumulative", "--time-resolution", "60",
        "--starts-at", "2026-10-01T00:00:00+02:00", "--ends-at", "2026-12-31T00:00:00Z",
    )  # fmt: skip
    season = Season.objects.get(id=13)
    board = Board.objects.get(season=season, slug="main")
    assert (board.rule, board.time_resolution_seconds) == ("cumulative", 60)
    assert season.starts_at == datetime(2026, 9, 30, 22, tzinfo=UTC)


@pytest.mark.django_db
def test_order_asc_and_more_boards() -> None:
    run(
        "--id", "14", "--name", "S14", "--order", "asc",
        "--starts-at", "2026-10-01T00:00:00Z", "--ends-at", "2026-12-31T00:00:00Z",
    )  # fmt: skip
    out = StringIO()
    call_command(
        "create_board", "--season", "14", "--slug", "lap-times", "--name", "Lap times",
        "--order", "asc", "--rule", "best", stdout=out,
    )  # fmt: skip
    assert "created board 'lap-times'" in out.getvalue()
    boards = {
        b.slug: (b.order, b.rule, b.codec.ascending) for b in Board.objects.filter(season_id=14)
    }
    assert boards == {"main": ("asc", "best", True), "lap-times": ("asc", "best", True)}
    with pytest.raises(CommandError, match="already has a board"):
        call_command("create_board", "--season", "14", "--slug", "lap-times", "--name", "x")
    with pytest.raises(CommandError, match="1 to 32 characters"):
        call_command("create_board", "--season", "14", "--slug", "Lap_Times", "--name", "x")
    with pytest.raises(CommandError, match="does not exist"):
        call_command("create_board", "--season", "99", "--slug", "kills", "--name", "x")


@pytest.mark.django_db
def test_metadata_boards_from_both_commands() -> None:
    run(
        "--id", "15", "--name", "S15", "--metadata",
        "--starts-at", "2026-10-01T00:00:00Z", "--ends-at", "2026-12-31T00:00:00Z",
    )  # fmt: skip
    call_command(
        "create_board", "--season", "15", "--slug", "laps", "--name", "Laps", "--metadata",
        stdout=StringIO(),
    )  # fmt: skip
    call_command(
        "create_board", "--season", "15", "--slug", "kills", "--name", "K", stdout=StringIO()
    )
    kept = dict(Board.objects.filter(season_id=15).values_list("slug", "keeps_metadata"))
    assert kept == {"main": True, "laps": True, "kills": False}


@pytest.mark.django_db
def test_rank_events_options_from_both_commands() -> None:
    run(
        "--id", "16", "--name", "S16", "--event-top-n", "10",
        "--starts-at", "2026-10-01T00:00:00Z", "--ends-at", "2026-12-31T00:00:00Z",
    )  # fmt: skip
    call_command(
        "create_board", "--season", "16", "--slug", "quiet", "--name", "Q", "--no-events",
        stdout=StringIO(),
    )  # fmt: skip
    call_command("create_board", "--season", "16", "--slug", "k", "--name", "K", stdout=StringIO())
    options = {b.slug: (b.rank_events, b.event_top_n) for b in Board.objects.filter(season_id=16)}
    assert options == {"main": (True, 10), "quiet": (False, 100), "k": (True, 100)}
    with pytest.raises(CommandError, match="event top N must be 1 to"):
        call_command(
            "create_board", "--season", "16", "--slug", "x", "--name", "X", "--event-top-n", "0"
        )


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--starts-at", "2026-10-01T00:00:00Z", "--ends-at", "2026-09-01T00:00:00Z"], "after"),
        (["--starts-at", "2026-10-01T00:00:00", "--ends-at", "2026-12-01T00:00:00Z"], "offset"),
        (["--starts-at", "yesterday", "--ends-at", "2026-12-01T00:00:00Z"], "RFC 3339"),
    ],
)
def test_bad_input_is_a_clear_error(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        run("--id", "14", "--name", "S14", *args)
    assert not Season.objects.filter(id=14).exists()


@pytest.mark.django_db
def test_duplicate_id_is_refused() -> None:
    dates = ["--starts-at", "2026-10-01T00:00:00Z", "--ends-at", "2026-12-31T00:00:00Z"]
    run("--id", "15", "--name", "first", *dates)
    with pytest.raises(CommandError, match="already exists"):
        run("--id", "15", "--name", "second", *dates)
    assert Season.objects.get(id=15).name == "first"


@pytest.mark.django_db
def test_tie_break_columns_on_the_main_board_and_on_another() -> None:
    from leaderboard.models import TiebreakColumn

    out = StringIO()
    call_command(
        "create_season", "--id", "15", "--name", "S15", "--tiebreak", "kills:desc",
        "--tiebreak", "deaths:asc",
        "--starts-at", "2026-10-01T00:00:00Z", "--ends-at", "2026-12-31T00:00:00Z", stdout=out,
    )  # fmt: skip
    assert "ranked by points, then kills:desc, deaths:asc, then the earliest time" in out.getvalue()
    main = Board.objects.get(season_id=15, slug="main")
    assert main.tiebreaks == (TiebreakColumn("kills", "desc"), TiebreakColumn("deaths", "asc"))
    assert main.max_points == 2_147_483_647
    call_command(
        "create_board", "--season", "15", "--slug", "laps", "--name", "Laps",
        "--tiebreak", "sectors:asc", stdout=StringIO(),
    )  # fmt: skip
    assert Board.objects.get(season_id=15, slug="laps").tiebreak_names == ("sectors",)
    with pytest.raises(CommandError, match="expected name:order"):
        call_command("create_board", "--season", "15", "--slug", "x", "--name", "x",
                     "--tiebreak", "kills")  # fmt: skip
    with pytest.raises(CommandError, match="must be a-z"):
        call_command("create_board", "--season", "15", "--slug", "x", "--name", "x",
                     "--tiebreak", "Kills:desc")  # fmt: skip
    with pytest.raises(CommandError, match="at most 3"):
        call_command(
            "create_board", "--season", "15", "--slug", "x", "--name", "x",
            *[arg for name in "abcd" for arg in ("--tiebreak", f"{name}:asc")],
        )  # fmt: skip
    with pytest.raises(CommandError, match="repeat"):
        call_command("create_board", "--season", "15", "--slug", "x", "--name", "x",
                     "--tiebreak", "a:asc", "--tiebreak", "a:desc")  # fmt: skip


@pytest.mark.django_db
def test_a_refused_main_board_leaves_no_season_behind() -> None:
    """The season was stored before its main board was checked: a refused board left a season
    without one, whose id the corrected command could no longer take."""
    dates = ["--starts-at", "2026-10-01T00:00:00Z", "--ends-at", "2026-12-31T00:00:00Z"]
    with pytest.raises(CommandError, match="join"):
        run("--id", "20", "--name", "S20", *dates, "--max-size", "10")
    assert not Season.objects.filter(id=20).exists()
    run("--id", "20", "--name", "S20", *dates, "--max-size", "10", "--join-required")
    assert Board.objects.get(season_id=20, slug="main").max_size == 10
