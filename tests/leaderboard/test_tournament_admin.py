"""Tournaments for staff and on the public pages: the options on the season's board rows, the
participants (count and link on the row, the list searched by player id, removal through the
service), the refused results; the board page says it is a tournament and shows attempts."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.test import Client

from ingestion.records import ConsumedRecord
from ingestion.services import match_results_ingest
from leaderboard.models import Board, Participant, RefusedResult
from leaderboard.services import board_player_join
from seasons.models import Season
from tests.factories import SeasonFactory, board_factory
from tests.helpers import make_live_season

from ..ingestion.ingest_helpers import LetterSink, Result
from .test_board_admin import SEASONS, START, _board_row, _management, _post_main_board

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_options_are_set_on_the_board_row_and_checked(staff: Client) -> None:
    season: Season = SeasonFactory.create(starts_at=START, ends_at=START + timedelta(days=30))
    main = Board.objects.get(season=season, slug="main")
    _post_main_board(
        staff, season, main, name="Main", order="desc", rule="best",
        time_resolution_seconds=1, join_required="on", max_size=16, max_attempts=3,
    )  # fmt: skip
    main.refresh_from_db()
    assert (main.join_required, main.max_size, main.max_attempts) == (True, 16, 3)
    # Seats without joining: the form says why, nothing changes.
    data = {
        "name": season.name,
        "ends_at_0": "2026-10-31",
        "ends_at_1": "00:00:00",
        **_management("boards", 1, 1),
        **_board_row(
            0,
            id=main.id,
            season=season.id,
            slug="main",
            name="Main",
            order="desc",
            rule="best",
            time_resolution_seconds=1,
            max_size=16,
        ),
        **_management("reward_tiers", 0, 0),
    }
    page = staff.post(f"{SEASONS}{season.id}/change/", data)
    assert page.status_code == 200
    assert "max size needs join required" in page.content.decode()
    main.refresh_from_db()
    assert main.join_required is True


def test_staff_see_participants_and_remove_them(staff: Client) -> None:
    season = make_live_season()
    cup = board_factory(season, "cup", join_required=True, max_size=3)
    other = board_factory(season, "other", join_required=True)
    for player in (11, 12, 13):
        board_player_join(board_id=cup.id, player_id=player)
    board_player_join(board_id=other.id, player_id=12)
    season_page = staff.get(f"{SEASONS}{season.id}/change/").content.decode()
    assert (
        f'<a href="/admin/leaderboard/participant/?board__id__exact={cup.id}">3/3 joined</a>'
        in season_page
    )
    listing = staff.get(f"/admin/leaderboard/participant/?board__id__exact={cup.id}")
    assert listing.status_code == 200
    assert listing.content.decode().count('class="action-checkbox"') == 3
    found = staff.get("/admin/leaderboard/participant/?q=12").content.decode()
    assert found.count('class="action-checkbox"') == 2
    assert "delete_selected" not in found
    ids = list(
        Participant.objects.filter(board=cup, player_id__in=[11, 13]).values_list("id", flat=True)
    )
    removed = staff.post(
        "/admin/leaderboard/participant/",
        {"action": "remove_participants", "_selected_action": [str(i) for i in ids]},
    )
    assert removed.status_code == 302
    cup.refresh_from_db()
    assert cup.participants == 1
    assert list(Participant.objects.filter(board=cup).values_list("player_id", flat=True)) == [12]
    # One by one from its page, too: the seat count follows.
    last = Participant.objects.get(board=cup)
    page = staff.post(f"/admin/leaderboard/participant/{last.id}/delete/", {"post": "yes"})
    assert page.status_code == 302
    cup.refresh_from_db()
    assert cup.participants == 0
    assert Participant.objects.filter(board=other).count() == 1
    assert staff.get("/admin/leaderboard/participant/add/").status_code == 403


def _play(season, board: str, plays: list[tuple[int, int]]) -> LetterSink:
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
    sink = LetterSink()
    match_results_ingest(topic=f"admin-{board}", records=records, dead_letters=sink)
    return sink


def test_refused_results_are_listed_and_the_board_page_says_it_is_a_tournament(
    staff: Client, client: Client
) -> None:
    season = make_live_season()
    cup = board_factory(season, "cup", join_required=True, max_size=4, max_attempts=2)
    for player in (1, 2):
        board_player_join(board_id=cup.id, player_id=player)
    letters = _play(season, "cup", [(1, 10), (1, 20), (1, 30), (2, 5), (3, 7)])
    assert sorted(letter.code for letter in letters.letters) == ["attempts_exhausted", "not_joined"]
    assert RefusedResult.objects.filter(board=cup).count() == 2
    refused = staff.get("/admin/leaderboard/refusedresult/?q=3").content.decode()
    assert "not_joined" in refused or "Not joined" in refused
    html = client.get(f"/seasons/{season.id}/boards/cup").content.decode()
    assert (
        "Tournament: players join to play (2 of 4 seats taken) · at most 2 attempts per player"
        in html
    )
    assert 'data-attempts="2"' in html
    assert '<td class="num attempts">2/2</td>' in html
    assert '<td class="num attempts">1/2</td>' in html
    plain = client.get(f"/seasons/{season.id}").content.decode()
    assert "Tournament" not in plain
    assert "attempts" not in plain
