"""Staff find match results by player id or match id in the admin."""

from __future__ import annotations

import pytest
from django.urls import reverse

from leaderboard.selectors.results import match_results_of_player
from tests.helpers import main_board_id, make_result, make_season

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:leaderboard_matchresult_changelist"


def _listed(admin_client, term: str) -> set:
    page = admin_client.get(reverse(CHANGELIST), {"q": term})
    assert page.status_code == 200
    return {r.pk for r in page.context["cl"].result_list}


def test_a_player_id_finds_that_players_results_in_every_season(admin_client) -> None:
    first, second = make_season(), make_season()
    theirs = {
        make_result(season=first, player_id=77).pk,
        make_result(season=second, player_id=77).pk,
        make_result(season=second, player_id=77, points=5).pk,
    }
    make_result(season=first, player_id=78)
    make_result(season=second, player_id=770)

    assert _listed(admin_client, "77") == theirs
    assert _listed(admin_client, " 77 ") == theirs
    assert _listed(admin_client, "9" * 19) == set()  # above any bigint: nothing, no error


def test_a_match_id_still_finds_its_results(admin_client) -> None:
    result = make_result(player_id=5)
    make_result(player_id=5)
    assert _listed(admin_client, str(result.match_id)) == {result.pk}


def test_the_selector_names_every_board_so_the_player_index_serves_it() -> None:
    seasons = [make_season(), make_season()]
    sql = str(match_results_of_player(player_id=77).query)
    assert '"board_id" IN (' in sql
    named = sql.split('"board_id" IN (', 1)[1].split(")", 1)[0]
    for season in seasons:
        assert str(main_board_id(season)) in named
