"""Tournament boards in the reads (contract 0.3): every entry of a board with max-attempts
carries ``attempts`` (top, live and from the snapshot, ranks, around, player, friends, daily,
the cohort reads); the boards list carries joinRequired, joined, maxSize and maxAttempts. Other
boards' entries do not change."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from ingestion.records import ConsumedRecord
from ingestion.services import match_results_ingest
from leaderboard.selectors.boards import board_get
from leaderboard.selectors.top import top_snapshot_memo_clear
from leaderboard.services import board_player_join, top_snapshot_refresh
from tests.factories import board_factory
from tests.helpers import make_live_season

from ..ingestion.ingest_helpers import LetterSink, Result

pytestmark = pytest.mark.django_db(transaction=True)


def _ingest(season, board: str, plays: list[tuple[int, int]]) -> None:
    at = season.starts_at + timedelta(days=1)
    records = [
        ConsumedRecord(
            0,
            offset,
            str(player).encode(),
            Result(
                uuid.uuid4(), player, season.id, points, at + timedelta(minutes=offset), board=board
            ).value(),
        )
        for offset, (player, points) in enumerate(plays)
    ]
    match_results_ingest(topic=f"reads-{board}", records=records, dead_letters=LetterSink())


def test_entries_of_a_board_with_max_attempts_carry_attempts(client, settings) -> None:
    settings.LEADERBOARD_PARTICIPANTS_CACHE_SECONDS = 0
    season = make_live_season()
    cup = board_factory(
        season, "cup", join_required=True, max_size=8, max_attempts=3, cohort_size=4
    )
    for player in (1, 2, 3):
        board_player_join(board_id=cup.id, player_id=player)
    # Player 1 plays 4 times (the 4th refused), 2 twice, 3 once; the main board the same.
    plays = [(1, 10), (2, 50), (1, 30), (3, 5), (1, 20), (2, 40), (1, 99)]
    _ingest(season, "cup", plays)
    _ingest(season, "main", plays)
    base = f"/api/seasons/{season.id}/boards/cup"
    expected = {1: 3, 2: 2, 3: 1}

    def attempts(entries: list[dict]) -> dict[int, int]:
        return {e["playerId"]: e["attempts"] for e in entries}

    top = client.get(f"{base}/top")
    assert top["X-Leaderboard-Source"] == "live"
    assert [(e["playerId"], e["points"]) for e in top.json()] == [(2, 50), (1, 30), (3, 5)]
    assert attempts(top.json()) == expected
    top_snapshot_refresh(board=board_get(board_id=cup.id))
    top_snapshot_memo_clear()
    snapshot = client.get(f"{base}/top")
    assert snapshot["X-Leaderboard-Source"] == "snapshot"
    assert snapshot.json() == top.json()
    assert attempts(client.get(f"{base}/ranks?start=1&count=10").json()) == expected
    assert attempts(client.get(f"{base}/players/3/around?radius=2").json()) == expected
    assert attempts(client.get(f"{base}/friends?ids=1,3").json()) == {1: 3, 3: 1}
    assert client.get(f"{base}/players/1").json()["attempts"] == 3
    day = (season.starts_at + timedelta(days=1)).date().isoformat()
    assert attempts(client.get(f"{base}/daily/{day}/top").json()) == expected
    cohort = client.get(f"{base}/players/1/cohort").json()
    assert attempts(cohort["entries"]) == expected
    # The main board has no max-attempts: its entries are as before.
    main = client.get(f"/api/seasons/{season.id}/boards/main/top").json()
    assert all("attempts" not in e for e in main)
    assert {e["playerId"]: e["points"] for e in main} == {1: 99, 2: 50, 3: 5}


def test_the_boards_list_carries_the_tournament_options_and_seats_taken(client, settings) -> None:
    settings.LEADERBOARD_PARTICIPANTS_CACHE_SECONDS = 0
    season = make_live_season()
    cup = board_factory(season, "cup", join_required=True, max_size=20, max_attempts=3)
    board_factory(season, "open", join_required=True)
    for player in range(1, 6):
        board_player_join(board_id=cup.id, player_id=player)
    boards = {b["slug"]: b for b in client.get(f"/api/seasons/{season.id}/boards").json()}
    options = ("joinRequired", "joined", "maxSize", "maxAttempts")
    assert {slug: tuple(b[o] for o in options) for slug, b in boards.items()} == {
        "main": (False, None, None, None),
        "cup": (True, 5, 20, 3),
        "open": (True, 0, None, None),
    }
    board_player_join(board_id=cup.id, player_id=6)
    boards = {b["slug"]: b for b in client.get(f"/api/seasons/{season.id}/boards").json()}
    assert boards["cup"]["joined"] == 6
