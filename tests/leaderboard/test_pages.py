"""The public HTML pages render the same entries as the API."""

from __future__ import annotations

import pytest

from tests.helpers import make_season

from .board_fixtures import write_season_board

pytestmark = pytest.mark.django_db


def test_seasons_page_links_each_board(client):
    season = make_season(name="Autumn Cup")
    response = client.get("/")
    assert response.status_code == 200
    assert b"Autumn Cup" in response.content
    assert f'href="/seasons/{season.id}"'.encode() in response.content


def test_board_page_shows_the_top_and_a_player_lookup(client, board_redis):
    season = make_season()
    write_season_board(board_redis, season)
    response = client.get(f"/seasons/{season.id}")
    assert response.status_code == 200
    html = response.content.decode()
    assert "Top 7" in html
    assert html.index("<td>2</td>") < html.index("<td>1</td>") < html.index("<td>6</td>")

    response = client.get(f"/seasons/{season.id}?player=6")
    html = response.content.decode()
    assert "Rank <strong>7</strong> of 7" in html
    assert "201 points to the next rank" in html
    assert '<tr class="me">' in html


@pytest.mark.parametrize(
    ("player", "message"),
    [("abc", "is not a player id"), ("999", "Player 999 has no score this season.")],
)
def test_board_page_lookup_errors(client, board_redis, player, message):
    season = make_season()
    write_season_board(board_redis, season)
    response = client.get(f"/seasons/{season.id}?player={player}")
    assert response.status_code == 200
    assert message in response.content.decode()


def test_unknown_season_page_is_404(client):
    assert client.get("/seasons/987654").status_code == 404
