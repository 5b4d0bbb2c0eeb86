"""closeout 0008 on a populated database: the final standings of closed boards with
max-attempts get each player's attempts (stored results, voided ones included) where the
season's results are still kept; boards without max-attempts and seasons whose results were
pruned stay null, and no row is lost.

The database goes back to the state before the migration, is filled through the historical
models, and migrates to 0008; it is left at the latest migration, whatever happens.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.migrations import historical_apps, migrate_to

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [
    ("closeout", "0007_league_rewards_history"),
    ("leaderboard", "0011_board_tournaments"),
    ("seasons", "0008_season_results_pruned_at"),
]
AFTER = [("closeout", "0008_final_standing_attempts")]

NOW = datetime.now(UTC).replace(microsecond=0)
KEPT, PRUNED = 7301, 7302


@pytest.fixture
def old_apps() -> Iterator[Any]:
    with historical_apps(BEFORE) as apps:
        yield apps


def test_closed_tournament_standings_get_their_attempts(old_apps) -> None:
    season_model = old_apps.get_model("seasons", "Season")
    board_model = old_apps.get_model("leaderboard", "Board")
    result_model = old_apps.get_model("leaderboard", "MatchResult")
    standing_model = old_apps.get_model("closeout", "FinalStanding")
    starts = NOW - timedelta(days=60)
    boards: dict[tuple[int, str], Any] = {}
    for season_id in (KEPT, PRUNED):
        season = season_model.objects.create(
            id=season_id,
            name=f"Season {season_id}",
            starts_at=starts,
            ends_at=starts + timedelta(days=30),
            status="closed",
            closed_at=starts + timedelta(days=31),
            results_pruned_at=NOW if season_id == PRUNED else None,
        )
        for slug, max_attempts in (("main", None), ("cup", 5)):
            boards[season_id, slug] = board_model.objects.create(
                season=season, slug=slug, name=slug, time_bits=32, max_attempts=max_attempts
            )
    # Player 1: three results on the kept season's cup (one voided), two on its main board;
    # player 2: one on the cup; player 3: a standing without results (none left: 0).
    plays = [("cup", 1, False), ("cup", 1, True), ("cup", 1, False), ("cup", 2, False)]
    plays += [("main", 1, False), ("main", 1, False)]
    for slug, player, voided in plays:
        result_model.objects.create(
            match_id=uuid.uuid4(),
            player_id=player,
            season_id=KEPT,
            board=boards[KEPT, slug],
            points=10,
            achieved_at=starts + timedelta(days=1),
            voided_at=NOW if voided else None,
        )
    for (season_id, _slug), board in boards.items():
        for rank, player in enumerate((1, 2, 3), start=1):
            standing_model.objects.create(
                season_id=season_id,
                board=board,
                rank=rank,
                player_id=player,
                points=100 - rank,
                reached_at=starts + timedelta(days=2),
            )

    executor = migrate_to(AFTER)
    new_apps = executor.loader.project_state(AFTER).apps
    standings = new_apps.get_model("closeout", "FinalStanding").objects.filter(
        season_id__in=(KEPT, PRUNED)
    )
    found = {
        (row.season_id, row.board.slug, row.player_id): row.attempts
        for row in standings.select_related("board")
    }
    every = ((s, b, p) for s in (KEPT, PRUNED) for b in ("main", "cup") for p in (1, 2, 3))
    expected: dict[tuple[int, str, int], int | None] = dict.fromkeys(every)
    expected.update({(KEPT, "cup", 1): 3, (KEPT, "cup", 2): 1, (KEPT, "cup", 3): 0})
    assert found == expected
    # Nothing else moved.
    assert new_apps.get_model("leaderboard", "MatchResult").objects.filter(
        season_id=KEPT
    ).count() == len(plays)
