"""Tournaments (contract 0.3): the board options, joining (race-free at the limit), the
migration on a populated database.

Ingestion's refusals (not_joined, attempts_exhausted, exactly once) are in
tests/ingestion/test_tournament_ingest.py; the API in tests/ingestion/test_join_api.py."""

from __future__ import annotations

import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from leaderboard.models import Board, Participant
from leaderboard.services import (
    BOARD_FULL,
    JOIN_NOT_REQUIRED,
    SEASON_ENDED,
    JoinRefused,
    board_player_join,
    board_players_remove,
    board_update,
)
from seasons.models import SeasonStatus
from tests.factories import board_factory
from tests.helpers import make_season

pytestmark = pytest.mark.django_db(transaction=True)

START = datetime(2026, 3, 2, tzinfo=UTC)


def _season(**kwargs):
    return make_season(
        starts_at=START - timedelta(days=1), ends_at=START + timedelta(days=30), **kwargs
    )


def _join(board: Board, player_id: int) -> str:
    try:
        outcome = board_player_join(board_id=board.id, player_id=player_id, now=START)
    except JoinRefused as exc:
        return exc.code
    return "joined" if outcome.joined else "already"


def test_a_thousand_concurrent_joins_for_twenty_seats_seat_exactly_twenty() -> None:
    season = _season()
    board = board_factory(season, "cup", join_required=True, max_size=20)

    def join(player_id: int) -> str:
        try:
            return _join(board, player_id)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=40) as pool:
        outcomes = Counter(pool.map(join, range(1, 1001)))
    assert outcomes == {"joined": 20, BOARD_FULL: 980}
    board.refresh_from_db()
    assert board.participants == 20
    assert Participant.objects.filter(board=board).count() == 20
    # A seated player joining again is told so; a newcomer still finds the board full.
    seated = Participant.objects.filter(board=board).values_list("player_id", flat=True).first()
    assert seated is not None
    assert _join(board, seated) == "already"
    assert _join(board, 5000) == BOARD_FULL


def test_joins_answer_by_the_boards_options_and_removal_frees_a_seat() -> None:
    season = _season()
    open_board = board_factory(season, "open")
    cup = board_factory(season, "cup", join_required=True, max_size=2)
    assert _join(open_board, 1) == JOIN_NOT_REQUIRED
    assert _join(cup, 1) == "joined"
    assert _join(cup, 1) == "already"
    assert _join(cup, 2) == "joined"
    assert _join(cup, 3) == BOARD_FULL
    assert board_players_remove(board_id=cup.id, player_ids=[1, 99]) == 1
    cup.refresh_from_db()
    assert cup.participants == 1
    assert _join(cup, 3) == "joined"
    # Unlimited seats without max size.
    free = board_factory(season, "free", join_required=True)
    assert [_join(free, p) for p in range(1, 30)] == ["joined"] * 29


def test_a_season_that_ended_takes_no_one_but_answers_those_who_joined() -> None:
    season = _season()
    cup = board_factory(season, "cup", join_required=True)
    assert _join(cup, 1) == "joined"
    after_end = season.ends_at + timedelta(seconds=1)
    with pytest.raises(JoinRefused) as refused:
        board_player_join(board_id=cup.id, player_id=2, now=after_end)
    assert refused.value.code == SEASON_ENDED
    assert board_player_join(board_id=cup.id, player_id=1, now=after_end).joined is False
    season.status = SeasonStatus.CLOSED
    season.save(update_fields=["status"])
    assert _join(cup, 3) == SEASON_ENDED


def _create_board(season_id: int, slug: str, *args: str) -> str:
    out = StringIO()
    call_command(
        "create_board",
        "--season",
        str(season_id),
        "--slug",
        slug,
        "--name",
        slug,
        *args,
        stdout=out,
        stderr=StringIO(),
    )
    return out.getvalue()


def test_create_board_and_create_season_take_the_options_and_refuse_bad_ones() -> None:
    season = _season()
    out = _create_board(
        season.id, "cup", "--join-required", "--max-size", "64", "--max-attempts", "3"
    )
    assert "tournament: join required, at most 64 players, at most 3 attempts" in out
    cup = Board.objects.get(season=season, slug="cup")
    assert (cup.join_required, cup.max_size, cup.max_attempts) == (True, 64, 3)
    _create_board(season.id, "tries", "--max-attempts", "5")
    tries = Board.objects.get(season=season, slug="tries")
    assert (tries.join_required, tries.max_size, tries.max_attempts) == (False, None, 5)
    for args, message in [
        (["--max-size", "0"], "must be 1 to 10000000"),
        (["--join-required", "--max-size", "-3"], "must be 1 to 10000000"),
        (["--join-required", "--max-size", "20000000"], "must be 1 to 10000000"),
        (["--join-required", "--max-size", "ten"], "must be an integer"),
        (["--max-attempts", "0"], "must be 1 to 10000"),
        (["--max-attempts", "10001"], "must be 1 to 10000"),
        (["--max-size", "10"], "max size needs join required"),
    ]:
        with pytest.raises(CommandError, match=message):
            _create_board(season.id, f"b{uuid.uuid4().hex[:6]}", *args)
    assert Board.objects.filter(season=season).count() == 3

    created = StringIO()
    call_command(
        "create_season",
        "--id",
        "4242",
        "--name",
        "Cup season",
        "--starts-at",
        "2026-10-01T00:00:00Z",
        "--ends-at",
        "2026-10-08T00:00:00Z",
        "--join-required",
        "--max-attempts",
        "2",
        stdout=created,
    )
    main = Board.objects.get(season_id=4242, slug="main")
    assert (main.join_required, main.max_size, main.max_attempts) == (True, None, 2)


def test_the_options_change_through_the_board_service_within_their_bounds() -> None:
    season = _season()
    cup = board_factory(season, "cup", join_required=True, max_size=10)
    spec: dict[str, Any] = {
        "name": "cup",
        "slug": "cup",
        "order": cup.order,
        "rule": cup.rule,
        "time_resolution_seconds": 1,
    }
    updated = board_update(board_id=cup.id, **spec, join_required=True, max_attempts=4)
    assert (updated.max_size, updated.max_attempts) == (None, 4)
    with pytest.raises(ValidationError, match="max size needs join required"):
        board_update(board_id=cup.id, **spec, max_size=3)
    with pytest.raises(ValidationError, match="max attempts must be 1 to"):
        board_update(board_id=cup.id, **spec, max_attempts=0)


# --- the migration on a populated database ----------------------------------------------------

BEFORE = [("leaderboard", "0010_league_boards")]


def _migrate(targets) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor


def test_the_migration_keeps_every_board_and_result_as_a_board_without_options() -> None:
    season = _season()
    board_factory(season, "groups", cohort_size=5)
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    try:
        executor = _migrate(BEFORE)
        apps = executor.loader.project_state(BEFORE).apps
        OldBoard = apps.get_model("leaderboard", "Board")
        OldResult = apps.get_model("leaderboard", "MatchResult")
        boards = list(OldBoard.objects.filter(season_id=season.id).order_by("id"))
        assert [b.slug for b in boards] == ["main", "groups"]
        for board in boards:
            for player in range(1, 4):
                OldResult.objects.create(
                    match_id=uuid.uuid4(),
                    player_id=player,
                    season_id=season.id,
                    board_id=board.id,
                    points=10 * player,
                    achieved_at=START,
                    void_reason="",
                )
    finally:
        _migrate(latest)
    migrated = list(Board.objects.filter(season=season).order_by("id"))
    assert [(b.join_required, b.max_size, b.max_attempts, b.participants) for b in migrated] == [
        (False, None, None, 0),
        (False, None, None, 0),
    ]
    assert migrated[1].cohort_size == 5
    assert sum(b.match_results.count() for b in migrated) == 6
    # The options can be set on a board that has results, and joining works at once.
    spec: dict[str, Any] = {
        "order": migrated[0].order,
        "rule": migrated[0].rule,
        "time_resolution_seconds": 1,
    }
    board_update(
        board_id=migrated[0].id, name="Main", slug="main", **spec, join_required=True, max_size=1
    )
    assert _join(migrated[0], 1) == "joined"
    assert _join(migrated[0], 2) == BOARD_FULL
