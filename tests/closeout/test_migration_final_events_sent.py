"""closeout 0006 on a populated database: the boards of seasons closed before rank events
existed count as sent (the close-out's sweep must not send every old season's season_final),
those of seasons still open do not, and no row is lost.

The database goes back to the state before the migration (closeout 0005, leaderboard 0009,
seasons 0006), is filled through the historical models, and migrates to 0006; it is left at
the latest migration, whatever happens (the rest of the suite needs it).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.migrations import historical_apps, migrate_to

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [
    ("closeout", "0005_player_history"),
    ("leaderboard", "0009_board_rank_events"),
    ("seasons", "0006_schedules"),
]
AFTER = [("closeout", "0006_final_events_sent")]

NOW = datetime.now(UTC).replace(microsecond=0)
# id: (status, boards): a closed season with two boards (one emitting no events: it counts as
# sent all the same), an active, a closing and a scheduled one.
SEASONS = {
    7201: ("closed", ("main", "kills")),
    7202: ("closed", ("main",)),
    7203: ("active", ("main", "weekly-kills")),
    7204: ("closing", ("main",)),
    7205: ("scheduled", ("main",)),
}


@pytest.fixture
def old_apps() -> Iterator[Any]:
    """The historical apps before 0006; the database goes back to the latest state after."""
    with historical_apps(BEFORE) as apps:
        yield apps


def test_boards_of_seasons_closed_before_count_as_sent(old_apps) -> None:
    season_model = old_apps.get_model("seasons", "Season")
    board_model = old_apps.get_model("leaderboard", "Board")
    standing_model = old_apps.get_model("closeout", "FinalStanding")
    boards: dict[int, list[int]] = {}
    for season_id, (status, slugs) in SEASONS.items():
        starts = NOW - timedelta(days=60) if status == "closed" else NOW - timedelta(days=5)
        season = season_model.objects.create(
            id=season_id,
            name=f"Season {season_id}",
            starts_at=starts,
            ends_at=starts + timedelta(days=30),
            status=status,
            closed_at=starts + timedelta(days=31) if status == "closed" else None,
        )
        boards[season_id] = [
            board_model.objects.create(
                season=season,
                slug=slug,
                name=slug,
                time_bits=32,
                rank_events=slug != "kills",
            ).id
            for slug in slugs
        ]
    for board_id in boards[7201]:
        standing_model.objects.create(
            season_id=7201,
            board_id=board_id,
            rank=1,
            player_id=5,
            points=900,
            reached_at=NOW - timedelta(days=40),
        )

    executor = migrate_to(AFTER)
    new_apps = executor.loader.project_state(AFTER).apps
    sent = new_apps.get_model("closeout", "FinalEventsSent")

    rows = {row.board_id: (row.season_id, row.events) for row in sent.objects.all()}
    assert rows == {
        board_id: (season_id, 0) for season_id in (7201, 7202) for board_id in boards[season_id]
    }
    # Nothing else moved: every season, board and standing is still there.
    assert new_apps.get_model("seasons", "Season").objects.filter(id__in=SEASONS).count() == 5
    assert new_apps.get_model("leaderboard", "Board").objects.filter(
        season_id__in=SEASONS
    ).count() == sum(len(b) for b in boards.values())
    assert (
        new_apps.get_model("closeout", "FinalStanding").objects.filter(season_id=7201).count() == 2
    )
