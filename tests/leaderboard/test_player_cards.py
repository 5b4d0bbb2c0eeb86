"""``GET /api/players/{player}``: the profile and every active season's board with a score."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ingestion.records import ConsumedRecord
from ingestion.services import match_results_ingest
from leaderboard import keys
from leaderboard.models import Board, BoardOrder, CohortMember, ScoringRule
from leaderboard.redis import get_board_redis
from leaderboard.services import board_create
from players.schema import ProfileUpdate
from players.services import player_profile_hide, player_profile_unhide, player_profiles_upsert
from seasons.leagues import LeagueSpec
from seasons.models import Season, SeasonStatus
from tests.helpers import make_live_season, make_season, wait_until
from tests.ingestion.ingest_helpers import LetterSink

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
        "recovering": [],
        "history": "/api/players/2/history",
    }


def test_a_board_being_recovered_is_named_and_the_card_answers_with_the_others(client, seasons):
    # Redis lost the kills board (its intact key with it): its own reads answer 503, and the
    # whole card did too.
    kills = Board.objects.get(season=seasons, slug="kills")
    get_board_redis().delete(keys.board_intact(board_id=kills.id))
    card = _card(client, 2)
    assert [(b["board"], b["rank"]) for b in card["boards"]] == [("main", 2)]
    assert card["recovering"] == [{"seasonId": seasons.id, "board": "kills"}]


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


def _play(season: Season, results: list[tuple[str, int, int]]) -> None:
    """(board, player, points) results through the consumer's batch handler, in order: cohorts
    are assigned as ingestion assigns them."""
    records = []
    for offset, (board, player, points) in enumerate(results):
        value = orjson.dumps(
            {
                "matchId": str(uuid.uuid4()),
                "playerId": player,
                "seasonId": season.id,
                "points": points,
                "achievedAt": (season.starts_at + timedelta(seconds=offset + 1)).isoformat(),
                "board": board,
            }
        )
        records.append(ConsumedRecord(0, offset, b"%d" % player, value))
    letters = LetterSink()
    match_results_ingest(
        topic=f"card-{uuid.uuid4().hex[:8]}", records=records, dead_letters=letters
    )
    assert letters.letters == []


def _rows(card: dict) -> dict[str, dict]:
    return {row["board"]: row for row in card["boards"]}


def test_league_and_cohort_boards_carry_tier_and_cohort_plain_boards_neither(client, board_redis):
    season = make_live_season()
    league = LeagueSpec(("bronze", "silver", "gold"), promote_percent=20, relegate_percent=20)
    board_create(season_id=season.id, slug="league", name="League", cohort_size=2, league=league)
    board_create(season_id=season.id, slug="duels", name="Duels", cohort_size=3)
    # A league board waiting for its league's previous close-out: scores, but no cohorts yet.
    board_create(season_id=season.id, slug="later", name="Later", cohort_size=2, league=league)
    Board.objects.filter(season=season, slug="later").update(league_waiting=True)
    _play(
        season,
        [
            ("league", 1, 30), ("league", 2, 20), ("league", 3, 10),  # cohorts {1, 2}, {3}
            ("duels", 3, 5), ("main", 3, 7), ("later", 3, 4),
        ],
    )  # fmt: skip
    assert not CohortMember.objects.filter(board__slug="later", board__season=season).exists()

    rows = _rows(_card(client, 3))
    assert rows["league"] == {
        "seasonId": season.id,
        "board": "league",
        "rank": 3,
        "points": 10,
        "percentile": 33.33,
        "tier": "bronze",
        "cohort": 2,
    }
    # A board with cohorts but no league: the cohort, no tier.
    assert (rows["duels"]["cohort"], "tier" in rows["duels"]) == (1, False)
    # Not in a cohort yet: both null, as the board's own player read answers the tier.
    assert (rows["later"]["tier"], rows["later"]["cohort"]) == (None, None)
    later = client.get(f"/api/seasons/{season.id}/boards/later/players/3").json()
    assert later["tier"] is None
    # A plain board: neither key.
    assert set(rows["main"]) == {"seasonId", "board", "rank", "points", "percentile"}
    first = _rows(_card(client, 1))["league"]
    assert (first["tier"], first["cohort"]) == ("bronze", 1)


def test_a_card_of_plain_boards_asks_nothing_about_cohorts(client, seasons):
    with CaptureQueriesContext(connection) as queries:
        card = _card(client, 2)
    assert [row["board"] for row in card["boards"]] == ["main", "kills"]
    asked = " ".join(q["sql"] for q in queries.captured_queries)
    assert CohortMember._meta.db_table not in asked
