from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from rest_framework.test import APIClient

from closeout.services import season_close
from leaderboard.models import MatchResult
from seasons.models import SeasonStatus
from tests.factories import MatchResultFactory, SeasonFactory, board_factory

START = datetime(2026, 10, 1, tzinfo=UTC)
END = START + timedelta(days=30)
NO_NAME = {"displayName": None, "country": None}

# A close-out waits for the match-results topic to drain: give it an empty one.
pytestmark = pytest.mark.usefixtures("drained_match_results")


@pytest.fixture
def api() -> APIClient:
    return APIClient()


@pytest.fixture
def season():
    season = SeasonFactory.create(starts_at=START, ends_at=END, status=SeasonStatus.ACTIVE)
    for player, points, seconds in [(7, 300, 90.5), (8, 500, 30.0), (9, 300, 60.0)]:
        MatchResultFactory.create(
            season=season,
            player_id=player,
            points=points,
            achieved_at=START + timedelta(seconds=seconds),
        )
    return season


@pytest.mark.django_db
def test_standings_are_404_with_a_reason_until_closed(api: APIClient, season) -> None:
    response = api.get(f"/api/seasons/{season.id}/standings")
    assert response.status_code == 404
    assert response.json() == {
        "detail": f"season {season.id} is active; final standings exist once it is closed"
    }
    season_close(season_id=season.id, now=END, grace_seconds=60)  # closing, draining
    response = api.get(f"/api/seasons/{season.id}/standings")
    assert response.status_code == 404
    assert "is closing" in response.json()["detail"]
    response = api.get("/api/seasons/999999/standings")
    assert response.status_code == 404
    assert response.json() == {"detail": "season 999999 does not exist"}


@pytest.mark.django_db
def test_standings_of_a_closed_season(api: APIClient, season) -> None:
    season_close(season_id=season.id, now=END, grace_seconds=0)
    response = api.get(f"/api/seasons/{season.id}/standings")
    assert response.status_code == 200
    assert response.json() == {
        "seasonId": season.id,
        "entries": [
            {
                "rank": 1,
                "playerId": 8,
                "points": 500,
                **NO_NAME,
                "reachedAt": "2026-10-01T00:00:30Z",
            },
            {
                "rank": 2,
                "playerId": 9,
                "points": 300,
                **NO_NAME,
                "reachedAt": "2026-10-01T00:01:00Z",
            },
            {
                "rank": 3,
                "playerId": 7,
                "points": 300,
                **NO_NAME,
                "reachedAt": "2026-10-01T00:01:30Z",
            },
        ],
    }
    response = api.get(f"/api/seasons/{season.id}/standings?limit=2")
    assert [e["playerId"] for e in response.json()["entries"]] == [8, 9]
    # Every read of main also answers under /leaderboard/, and under /boards/main/.
    for path in ("leaderboard/standings", "boards/main/standings"):
        other = api.get(f"/api/seasons/{season.id}/{path}")
        assert other.status_code == 200, path
        assert other.json() == api.get(f"/api/seasons/{season.id}/standings").json()


@pytest.mark.django_db
@pytest.mark.parametrize("season_id", ["abc", "0", "12.0", "+3"])
@pytest.mark.parametrize("path", ["standings", "leaderboard/standings", "boards/main/standings"])
def test_a_malformed_season_is_400(api: APIClient, season_id: str, path: str) -> None:
    response = api.get(f"/api/seasons/{season_id}/{path}")
    assert response.status_code == 400
    assert "season" in response.json()["errors"]


@pytest.mark.django_db
@pytest.mark.parametrize("limit", ["0", "-3", "abc", "1001", "2.5", "1.0", "+5", " 5", "1_000"])
def test_bad_limit_is_400(api: APIClient, season, limit: str) -> None:
    season_close(season_id=season.id, now=END, grace_seconds=0)
    response = api.get(f"/api/seasons/{season.id}/standings", {"limit": limit})
    assert response.status_code == 400
    # The read API's error shape, like every public view.
    assert "limit" in response.json()["errors"]


@pytest.mark.django_db
def test_standings_of_a_board_with_max_attempts_carry_the_attempts_kept_past_the_results(
    api: APIClient, season
) -> None:
    cup = board_factory(season, "cup", max_attempts=3)
    # Player 4: three matches, one voided (voiding does not give the attempt back); 5: one.
    for player, points, voided in [(4, 10, False), (4, 70, True), (4, 40, False), (5, 20, False)]:
        MatchResultFactory.create(
            season=season,
            board=cup,
            player_id=player,
            points=points,
            achieved_at=START + timedelta(minutes=points),
            voided_at=START + timedelta(days=1) if voided else None,
        )
    season_close(season_id=season.id, now=END, grace_seconds=0)

    def standings(board: str) -> list[dict]:
        response = api.get(f"/api/seasons/{season.id}/boards/{board}/standings")
        assert response.status_code == 200
        return response.json()["entries"]

    expected = [(4, 40, 3), (5, 20, 1)]
    assert [(e["playerId"], e["points"], e["attempts"]) for e in standings("cup")] == expected
    # The main board has no max-attempts: its entries have no such field.
    assert all("attempts" not in entry for entry in standings("main"))
    # Stored at close-out: the standings still say it once the results are pruned.
    MatchResult.objects.filter(board=cup).delete()
    assert [(e["playerId"], e["points"], e["attempts"]) for e in standings("cup")] == expected
