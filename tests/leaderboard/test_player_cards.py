"""``GET /api/players/{player}``: the profile and every active season's board with a score."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from leaderboard import keys
from leaderboard.models import Board, BoardOrder, ScoringRule
from leaderboard.services import board_create
from players.schema import ProfileUpdate
from players.services import player_profile_hide, player_profile_unhide, player_profiles_upsert
from seasons.models import SeasonStatus
from tests.helpers import make_season, wait_until

from .board_fixtures import write_board, write_season_board

pytestmark = pytest.mark.django_db(transaction=True)


def _card(client, player, status=200):
    response = client.get(f"/api/players/{player}")
    assert response.status_code == status, response.content
    return response.json()


@pytest.fixture
def seasons(board_redis):
    active = make_season(status=SeasonStatus.ACTIVE)
    # Main: players 1..4 with points 400, 300, 200, 100.
    write_season_board(board_redis, active, {p: (500 - 100 * p, p) for p in range(1, 5)})
    board_create(
        season_id=active.id,
        slug="kills",
        name="Kills",
        order=BoardOrder.DESC,
        rule=ScoringRule.CUMULATIVE,
    )
    kills = Board.objects.get(season=active, slug="kills")
    write_board(board_redis, keys.board(board_id=kills.id), active, {2: (9, 1)})
    # A closed season's board: not on the card.
    closed = make_season(status=SeasonStatus.CLOSED)
    write_season_board(board_redis, closed, {2: (1, 1)})
    return active


def test_the_card_lists_profile_and_every_board_with_a_score(client, seasons):
    player_profiles_upsert(
        profiles=[
            ProfileUpdate(
                2, "Bob", "DE", "https://x.example/b.png", datetime(2026, 1, 1, tzinfo=UTC)
            )
        ]
    )
    assert _card(client, 2) == {
        "playerId": 2,
        "displayName": "Bob",
        "country": "DE",
        "avatarUrl": "https://x.example/b.png",
        "boards": [
            {"seasonId": seasons.id, "board": "main", "rank": 2, "points": 300, "percentile": 75.0},
            {"seasonId": seasons.id, "board": "kills", "rank": 1, "points": 9, "percentile": 100.0},
        ],
        "history": "/api/players/2/history",
    }


def test_a_score_without_a_profile_or_a_profile_without_a_score(client, seasons):
    card = _card(client, 4)
    assert (card["displayName"], card["country"], card["avatarUrl"]) == (None, None, None)
    assert card["boards"][0]["percentile"] == 25.0
    player_profiles_upsert(
        profiles=[ProfileUpdate(77, "Newbie", None, None, datetime(2026, 1, 1, tzinfo=UTC))]
    )
    assert _card(client, 77)["boards"] == []


def test_neither_is_a_404_and_a_bad_id_a_400(client, seasons):
    assert "neither" in _card(client, 99, status=404)["detail"]
    assert set(_card(client, "abc", status=400)) == {"detail", "errors"}


def test_a_hidden_name_reads_null_within_5_seconds_until_unhidden(client, seasons):
    player_profiles_upsert(
        profiles=[ProfileUpdate(1, "Rude", "FR", None, datetime(2026, 1, 1, tzinfo=UTC))]
    )
    player_profile_hide(player_id=1)
    wait_until(lambda: _card(client, 1)["displayName"] is None, timeout=5)
    assert _card(client, 1)["country"] == "FR"
    player_profile_unhide(player_id=1)
    assert _card(client, 1)["displayName"] == "Rude"
