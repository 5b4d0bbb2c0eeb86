"""The public pages show each player's name (or "Player <id>") and a flag from the country."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from leaderboard.templatetags.names import flag
from players.schema import ProfileUpdate
from players.services import player_profile_hide, player_profiles_upsert

pytestmark = pytest.mark.django_db(transaction=True)

AT = datetime(2026, 1, 1, tzinfo=UTC)
FRENCH_FLAG = "\U0001f1eb\U0001f1f7"


def test_the_flag_is_the_pair_of_regional_indicators_of_the_code():
    assert flag("FR") == FRENCH_FLAG
    assert flag("jp") == "\U0001f1ef\U0001f1f5"
    assert flag(None) == flag("") == flag("F") == flag("F1") == flag("ÉÉ") == ""


def _row(html: str, player: int) -> str:
    start = html.index(f'<tr data-player="{player}"')
    return html[start : html.index("</tr>", start)]


def test_the_board_page_shows_names_flags_and_the_fallback(client, season):
    player_profiles_upsert(
        profiles=[
            ProfileUpdate(2, "Alice <b>", "FR", None, AT),
            ProfileUpdate(1, "Bob", None, None, AT),
        ]
    )
    html = client.get(f"/seasons/{season.id}").content.decode()
    alice = _row(html, 2)
    # Escaped like any user text; the flag drawn from the code, no image or external request.
    assert ">Alice &lt;b&gt;</a>" in alice
    assert f'<span class="flag" role="img" aria-label="FR" title="FR">{FRENCH_FLAG}</span>' in alice
    assert ">Bob</a>" in _row(html, 1)
    assert "flag" not in _row(html, 1)
    # No profile: the fallback.
    assert ">Player 6</a>" in _row(html, 6)
    assert "<img" not in html


def test_the_player_lookup_shows_the_name_and_a_hidden_one_falls_back(client, season):
    player_profiles_upsert(profiles=[ProfileUpdate(6, "Zoë", "DE", None, AT)])
    html = client.get(f"/seasons/{season.id}?player=6").content.decode()
    # Isolated: a name of right-to-left or override characters cannot reorder what follows it.
    assert "<bdi>Zoë</bdi>" in html.split('id="player-heading"', 1)[1].split("</h2>", 1)[0]
    player_profile_hide(player_id=6)
    html = client.get(f"/seasons/{season.id}?player=6").content.decode()
    heading = html.split('id="player-heading"', 1)[1].split("</h2>", 1)[0]
    assert "Zoë" not in html
    assert "Player 6" in heading
