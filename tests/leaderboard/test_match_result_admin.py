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


def test_a_result_is_read_only_in_the_admin_and_the_void_is_its_one_change(admin_client) -> None:
    result = make_result(player_id=5, points=40)
    change = reverse("admin:leaderboard_matchresult_change", args=[result.pk])
    page = admin_client.get(change)
    assert page.status_code == 200
    html = page.content.decode()
    assert 'name="points"' not in html
    assert 'name="voided_at_0"' not in html
    # A post of edited fields changes nothing: the row is not editable here.
    admin_client.post(change, {"points": "99999", "player_id": "6"})
    result.refresh_from_db()
    assert (result.points, result.player_id, result.voided_at) == (40, 5, None)

    assert admin_client.get(reverse("admin:leaderboard_matchresult_add")).status_code == 403
    delete = reverse("admin:leaderboard_matchresult_delete", args=[result.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    assert type(result).objects.filter(pk=result.pk).exists()
    listing = admin_client.get(reverse(CHANGELIST)).content.decode()
    assert 'value="void_match_results"' in listing
    assert 'value="delete_selected"' not in listing


def test_a_ban_of_an_impossible_player_id_is_a_form_error(admin_client) -> None:
    season = make_season()
    page = admin_client.post(
        reverse("admin:leaderboard_playerban_add"),
        {"season": season.id, "player_id": "0", "reason": "smurf"},
    )
    assert page.status_code == 200
    assert "player ids are positive integers, got 0" in page.content.decode()
