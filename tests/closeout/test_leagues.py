"""Tiered leagues (contract 0.3, docs/leagues.md): a schedule's boards with cohorts, tiers that
move players up and down at each close-out, decided from PostgreSQL in the close-out's
transaction and applied to the next season, whose cohorts wait for them.

Against the real PostgreSQL and Redis: results go through the consumer's batch handler
(``match_results_ingest``), seasons through the schedule, close-outs through ``season_close``.
"""

from __future__ import annotations

import random
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from io import StringIO

import orjson
import psycopg
import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, transaction
from django.test import Client, override_settings
from django.utils import timezone

import closeout.services.close_out as close_out_module
from closeout.models import FinalStanding, HistoryEntry, RewardGrant
from closeout.selectors import StandingRow
from closeout.services import (
    CloseOutcome,
    reward_tier_create,
    schedule_advance,
    schedule_create,
    season_close,
    season_history_archive,
)
from closeout.tasks import seasons_close_due_task
from ingestion.records import ConsumedRecord
from ingestion.services import match_results_ingest
from leaderboard.models import Board, Cohort, CohortMember, LeagueMovement, MatchResult
from leaderboard.selectors.boards import BoardRef
from leaderboard.services import (
    BoardsCorrected,
    ResultColumns,
    ResultRow,
    boards_correct,
    match_result_void,
    match_results_store,
    top_snapshot_refresh,
)
from leaderboard.services.results import LOCK_BOARDS_SQL
from seasons.leagues import Movement, league_movement, league_movements
from seasons.models import Schedule, Season, SeasonStatus
from tests.factories import SeasonFactory, board_factory
from tests.helpers import subprocess_database_url, wait_until
from tests.ingestion.ingest_helpers import LetterSink

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("board_redis", "drained_match_results"),
]

TIERS = ("bronze", "silver", "gold")
TOPIC = "league-test"
# Weekly seasons in the past (results may not be in the future), starting on a Monday.
_NOW = timezone.now()
T0 = (_NOW - timedelta(days=_NOW.weekday() + 35)).replace(hour=0, minute=0, second=0, microsecond=0)
WEEK = timedelta(days=7)


def make_league(*, size: int = 5, promote: int = 40, relegate: int = 40) -> Schedule:
    template = SeasonFactory.create(
        starts_at=T0 - timedelta(days=30), ends_at=T0 - timedelta(days=1)
    )
    board_factory(template, "league", cohort_size=size)
    return schedule_create(
        slug="weekly-league",
        name="Weekly league",
        cron="0 0 * * 1",
        template_season_id=template.id,
        lead_minutes=60,
        starts_from=T0 - timedelta(minutes=1),
        tiers=TIERS,
        promote_percent=promote,
        relegate_percent=relegate,
    )


def open_season(schedule: Schedule, number: int) -> Season:
    """Occurrence ``number`` (from 1), created at its lead time, i.e. while the one before runs."""
    start = T0 + (number - 1) * WEEK
    created = schedule_advance(schedule_id=schedule.id, now=start - timedelta(minutes=60)).created
    assert len(created) == 1, created
    season = Season.objects.get(id=created[0])
    Season.objects.filter(id=season.id).update(status=SeasonStatus.ACTIVE)
    return season


_offsets: Counter[int] = Counter()


def play(season: Season, results: list[tuple[int, int, int]], *, board: str = "league") -> None:
    """One batch through the consumer's batch handler, in the given order (a player's first
    result decides their place among the batch's newcomers: seconds, then player id)."""
    assert _batch(season, results, board=board) == []


def _batch(
    season: Season, results: list[tuple[int, int, int]], *, board: str = "league"
) -> list[str]:
    """``play``'s batch, answering the codes of its dead letters."""
    records = []
    for player, points, second in results:
        achieved = season.starts_at + timedelta(seconds=second)
        value = orjson.dumps(
            {
                "matchId": str(uuid.uuid4()),
                "playerId": player,
                "seasonId": season.id,
                "points": points,
                "achievedAt": achieved.isoformat(),
                "board": board,
            }
        )
        records.append(ConsumedRecord(0, _offsets[0], b"%d" % player, value))
        _offsets[0] += 1
    letters = LetterSink()
    match_results_ingest(topic=TOPIC, records=records, dead_letters=letters)
    return [letter.code for letter in letters.letters]


def close(season: Season) -> None:
    result = season_close(
        season_id=season.id, force=True, now=season.ends_at + timedelta(seconds=1)
    )
    assert result.outcome == CloseOutcome.CLOSED, result.describe()


def league_board(season: Season) -> Board:
    return Board.objects.get(season=season, slug="league")


def cohorts_of(season: Season) -> dict[int, tuple[str, set[int]]]:
    """cohort number -> (tier name, members)."""
    board = league_board(season)
    out: dict[int, tuple[str, set[int]]] = {}
    for cohort in Cohort.objects.filter(board=board):
        members = set(
            CohortMember.objects.filter(cohort=cohort).values_list("player_id", flat=True)
        )
        assert cohort.tier is not None
        out[cohort.number] = (board.tiers[cohort.tier], members)
    return out


def tier_of(season: Season) -> dict[int, str]:
    return {p: tier for tier, members in cohorts_of(season).values() for p in members}


def movements(season: Season) -> dict[int, tuple[str, str, int]]:
    """player -> (tier played, movement, cohort rank)."""
    board = league_board(season)
    return {
        m.player_id: (board.tiers[m.tier], m.movement, m.cohort_rank)
        for m in LeagueMovement.objects.filter(board=board)
    }


P, R, S = Movement.PROMOTED, Movement.RELEGATED, Movement.STAYED


def test_three_seasons_move_players_up_and_down_with_ties_and_skipped_seasons(
    client: Client,
) -> None:
    """Cohorts of 5, 40% up and 40% down (2 each way): the rounding is floor, ties at the
    promotion boundary go up together, ties at the relegation boundary stay together, nobody
    moves past the ends, a player who skips a season keeps their tier."""
    schedule = make_league()
    one = open_season(schedule, 1)
    assert league_board(one).tiers == list(TIERS)
    assert not league_board(one).league_waiting  # the first season waits for nobody
    play(
        one,
        [
            (1, 50, 1), (2, 40, 2), (3, 30, 3), (4, 20, 4), (5, 10, 5),
            # A tie at the promotion boundary: 7 and 8 reached 40 in the same second.
            (6, 50, 6), (7, 40, 7), (8, 40, 7), (9, 40, 9), (10, 10, 10),
            (11, 99, 11),  # alone in a cohort: 40% of 1 is 0 players
        ],
    )  # fmt: skip
    assert cohorts_of(one) == {
        1: ("bronze", {1, 2, 3, 4, 5}),
        2: ("bronze", {6, 7, 8, 9, 10}),
        3: ("bronze", {11}),
    }

    two = open_season(schedule, 2)
    # Created while season 1 runs: its cohorts wait for season 1's close-out.
    assert league_board(two).league_waiting
    close(one)
    assert movements(one) == {
        1: ("bronze", P, 1), 2: ("bronze", P, 2), 3: ("bronze", S, 3),
        4: ("bronze", S, 4), 5: ("bronze", S, 5),  # the bottom tier relegates nobody
        6: ("bronze", P, 1), 7: ("bronze", P, 2), 8: ("bronze", P, 3),  # 8 tied with 7
        9: ("bronze", S, 4), 10: ("bronze", S, 5),
        11: ("bronze", S, 1),
    }  # fmt: skip
    assert not league_board(two).league_waiting  # opened by the close-out

    play(
        two,
        [
            (1, 10, 1), (2, 20, 2), (6, 20, 2), (7, 40, 4), (8, 50, 5),
            (3, 50, 6), (4, 40, 7), (5, 30, 8), (9, 20, 9), (10, 10, 10),
            (12, 70, 12),  # new: the first tier
        ],
    )  # fmt: skip
    # 11 skips season 2.
    assert cohorts_of(two) == {
        1: ("silver", {1, 2, 6, 7, 8}),
        2: ("bronze", {3, 4, 5, 9, 10}),
        3: ("bronze", {12}),
    }
    three = open_season(schedule, 3)
    close(two)
    assert movements(two) == {
        8: ("silver", P, 1), 7: ("silver", P, 2),
        # 2 and 6 tie at the relegation boundary (20 in the same second): both stay.
        2: ("silver", S, 3), 6: ("silver", S, 4),
        1: ("silver", R, 5),
        3: ("bronze", P, 1), 4: ("bronze", P, 2), 5: ("bronze", S, 3), 9: ("bronze", S, 4),
        10: ("bronze", S, 5),
        12: ("bronze", S, 1),
    }  # fmt: skip

    play(
        three,
        [(p, 100 - p, p) for p in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)],
    )
    assert tier_of(three) == {
        7: "gold", 8: "gold",
        2: "silver", 6: "silver", 3: "silver", 4: "silver",
        1: "bronze", 5: "bronze", 9: "bronze", 10: "bronze", 12: "bronze",
        11: "bronze",  # skipped season 2: kept the tier season 1 gave
    }  # fmt: skip

    # Every read of the league board carries each entry's tier.
    base = f"/api/seasons/{three.id}/boards/league"
    board = BoardRef.from_model(league_board(three))
    top_snapshot_refresh(board=board)
    tiers = tier_of(three)
    for path in (
        "top?limit=20",
        "ranks?start=1&count=20",
        "players/7/around?radius=20",
        "friends?ids=1,2,3,4,5,6,7,8,9,10,11,12",
        f"daily/{three.starts_at.date().isoformat()}/top",
    ):
        body = client.get(f"{base}/{path}").json()
        assert {e["playerId"]: e["tier"] for e in body} == tiers, path
    assert client.get(f"{base}/players/7").json()["tier"] == "gold"
    # Not a league board: no tier on its entries.
    play(three, [(1, 5, 1)], board="main")
    assert "tier" not in client.get(f"/api/seasons/{three.id}/leaderboard/players/1").json()
    boards = {b["slug"]: b for b in client.get(f"/api/seasons/{three.id}/boards").json()}
    assert (boards["league"]["tiers"], boards["league"]["promotePercent"]) == (list(TIERS), 40)
    assert boards["main"]["tiers"] is None

    # The cohort reads: the tier, each entry's tier and where it would go if the season ended.
    gold = client.get(f"{base}/players/8/cohort").json()
    assert gold["tier"] == "gold"
    assert [(e["playerId"], e["tier"], e["movement"]) for e in gold["entries"]] == [
        (7, "gold", S),
        (8, "gold", S),
    ]
    silver = client.get(f"{base}/players/2/cohort").json()
    assert silver["tier"] == "silver"
    # 40% of 4 is 1: the best goes up (to gold), the worst down.
    assert [(e["playerId"], e["movement"]) for e in silver["entries"]] == [
        (2, P),
        (3, S),
        (4, S),
        (6, R),
    ]

    # History: tier and movement of every player on every closed league season.
    season_history_archive(season_id=one.id)
    season_history_archive(season_id=two.id)
    history = client.get("/api/players/2/history?schedule=weekly-league&board=league").json()
    assert [(h["seasonId"], h["tier"], h["movement"]) for h in history] == [
        (two.id, "silver", S),
        (one.id, "bronze", P),
    ]
    assert client.get("/api/players/1/history?board=league").json()[0]["movement"] == R
    assert HistoryEntry.objects.filter(board__season=one, player_id=11).get().tier == "bronze"
    # The standings of a closed league board carry the tier and the movement.
    standings = client.get(f"/api/seasons/{two.id}/boards/league/standings").json()["entries"]
    assert {e["playerId"]: (e["tier"], e["movement"]) for e in standings}[1] == ("silver", R)


def test_rewards_follow_the_rank_within_each_cohort_and_the_league_tier() -> None:
    """A league board pays by rank within each cohort; a reward tier naming a league tier pays
    that tier's cohorts only and wins over one naming none (a gold winner gets more)."""
    schedule = make_league(size=3, promote=34, relegate=34)
    template = schedule.template_season
    reward_tier_create(
        season_id=template.id, rank_from=1, rank_to=1, reward_name="cup", board_slug="league"
    )
    reward_tier_create(
        season_id=template.id,
        rank_from=1,
        rank_to=2,
        reward_name="silver cup",
        quantity=3,
        board_slug="league",
        league_tier="silver",
    )
    with pytest.raises(ValidationError, match="not a league board"):
        reward_tier_create(
            season_id=template.id, rank_from=5, rank_to=5, reward_name="x", league_tier="gold"
        )
    # Ranks within a cohort: FINAL_STANDINGS_SIZE (the whole board's top) does not bound them.
    with override_settings(FINAL_STANDINGS_SIZE=1):
        reward_tier_create(
            season_id=template.id,
            rank_from=3,
            rank_to=3,
            reward_name="medal",
            board_slug="league",
            league_tier="silver",
        ).delete()
    with pytest.raises(ValidationError, match="platinum"):
        reward_tier_create(
            season_id=template.id,
            rank_from=5,
            rank_to=5,
            reward_name="x",
            board_slug="league",
            league_tier="platinum",
        )
    one = open_season(schedule, 1)
    play(one, [(p, 10 * p, p) for p in range(1, 7)])  # cohorts {1,2,3} and {4,5,6}
    two = open_season(schedule, 2)
    close(one)
    grants = {
        g.player_id: (g.rank, g.reward_name, g.quantity)
        for g in RewardGrant.objects.filter(season=one)
    }
    assert grants == {3: (1, "cup", 1), 6: (1, "cup", 1)}  # each cohort's winner
    play(two, [(p, 10 * p, p) for p in range(1, 7)])
    assert tier_of(two) == {
        3: "silver",
        6: "silver",
        1: "bronze",
        2: "bronze",
        4: "bronze",
        5: "bronze",
    }
    open_season(schedule, 3)
    close(two)
    grants = {
        g.player_id: (g.rank, g.reward_name, g.quantity)
        for g in RewardGrant.objects.filter(season=two)
    }
    # Silver's cohort (3, 6): ranks 1 and 2 get the silver cup; the winners of bronze's two
    # cohorts ({1, 2, 4} and {5}) the plain cup.
    assert grants == {
        6: (1, "silver cup", 3),
        3: (2, "silver cup", 3),
        4: (1, "cup", 1),
        5: (1, "cup", 1),
    }


def test_results_before_the_previous_close_out_wait_for_their_tier(client: Client) -> None:
    """Season 2 starts the moment season 1 ends, before season 1's close-out has decided who
    plays where: its results count on the board at once, its cohorts form only once the
    movements are committed, each player in the tier they earned, in the order they played."""
    schedule = make_league(size=2, promote=50, relegate=0)
    one = open_season(schedule, 1)
    play(one, [(1, 90, 1), (2, 10, 2), (3, 80, 3), (4, 20, 4)])
    two = open_season(schedule, 2)
    play(two, [(4, 5, 1), (1, 7, 2), (5, 3, 3)])  # season 1 is not closed yet

    board = league_board(two)
    assert board.league_waiting
    assert CohortMember.objects.filter(board=board).count() == 0
    base = f"/api/seasons/{two.id}/boards/league"
    entries = client.get(f"{base}/ranks?start=1&count=10").json()
    assert [(e["playerId"], e["tier"]) for e in entries] == [(1, None), (4, None), (5, None)]
    waiting = client.get(f"{base}/players/1/cohort")
    assert waiting.status_code == 404
    assert f"once season {one.id}" in waiting.json()["detail"]
    # Season 2 cannot be finalized before season 1: its tiers come from it.
    early = season_close(season_id=two.id, force=True, now=two.ends_at + timedelta(seconds=1))
    assert early.outcome == CloseOutcome.LEAGUE_WAITING
    assert early.waiting_for_season == one.id
    Season.objects.filter(id=two.id).update(status=SeasonStatus.ACTIVE)

    close(one)  # 1 and 3 promoted
    assert cohorts_of(two) == {1: ("bronze", {4, 5}), 2: ("silver", {1})}
    play(two, [(3, 1, 10), (6, 1, 11)])  # newcomers after the opening join at once
    assert cohorts_of(two) == {1: ("bronze", {4, 5}), 2: ("silver", {1, 3}), 3: ("bronze", {6})}
    assert client.get(f"{base}/players/1/cohort").json()["tier"] == "silver"


def test_an_opening_never_misses_a_batch_in_flight_and_later_batches_assign_themselves() -> None:
    """The race: a batch of season 2 stored but not committed when season 1's close-out opens
    season 2's board, and another batch arriving while the opening waits. The opening waits for
    the first (the board's row lock), sees its players and places them; the second places its
    own newcomers, or is placed by the opening: either way each player gets one cohort, in the
    tier season 1 decided."""
    schedule = make_league(size=3, promote=34, relegate=0)
    one = open_season(schedule, 1)
    play(one, [(1, 90, 1), (2, 10, 2), (3, 50, 3)])  # 1 goes up to silver
    two = open_season(schedule, 2)
    board = league_board(two)
    stored, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def row(player: int, offset: int) -> ResultRow:
        return ResultRow(
            uuid.uuid4(), player, two.id, board.id, 10, two.starts_at + timedelta(seconds=player),
            1, offset,
        )  # fmt: skip

    def in_flight() -> None:
        try:
            with transaction.atomic():
                match_results_store(results=ResultColumns.of([row(1, 1), row(2, 2)]))
                stored.set()
                release.wait(timeout=30)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    def later() -> None:
        try:
            match_results_store(results=ResultColumns.of([row(3, 3), row(4, 4)]))
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    def close_one() -> None:
        try:
            close(one)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    first = threading.Thread(target=in_flight)
    first.start()
    assert stored.wait(timeout=30)
    closer = threading.Thread(target=close_one)
    closer.start()
    # The opening waits on the board's row, held by the batch in flight.
    wait_until(lambda: _waiting_on_a_lock("FOR UPDATE OF b"), timeout=30)
    second = threading.Thread(target=later)
    second.start()
    release.set()
    for thread in (first, closer, second):
        thread.join(timeout=60)
    assert errors == []
    board.refresh_from_db()
    assert not board.league_waiting
    placed = dict(CohortMember.objects.filter(board=board).values_list("player_id", "cohort__tier"))
    assert placed == {1: 1, 2: 0, 3: 0, 4: 0}  # 1 silver, the rest bronze; nobody twice
    assert Counter(Cohort.objects.filter(board=board).values_list("tier", flat=True)) == {
        0: 1,
        1: 1,
    }


def _waiting_on_a_lock(query_part: str, *, on: psycopg.Connection | None = None) -> bool:
    with on.cursor() if on is not None else connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND query LIKE %s AND pid <> pg_backend_pid()",
            [f"%{query_part}%"],
        )
        row = cursor.fetchone()
    return bool(row and row[0])


def test_a_crash_between_the_close_out_and_the_opening_is_repaired_by_the_sweep() -> None:
    schedule = make_league(size=2, promote=50, relegate=50)
    one = open_season(schedule, 1)
    play(one, [(1, 90, 1), (2, 10, 2)])
    two = open_season(schedule, 2)
    play(two, [(2, 5, 1)])
    close(one)
    # As if the process died after season 1's commit, before the opening's.
    CohortMember.objects.filter(board__season=two).delete()
    Cohort.objects.filter(board__season=two).delete()
    Board.objects.filter(season=two).update(league_waiting=True)
    seasons_close_due_task()
    assert tier_of(two) == {2: "bronze"}
    assert not league_board(two).league_waiting


def _in_thread(work: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """``work`` on its own thread and database connection: (the thread, [its result or the
    exception it raised])."""
    out: list[object] = []

    def run() -> None:
        try:
            out.append(work())
        except BaseException as exc:
            out.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def _standings_order(season: Season) -> list[int]:
    return list(
        FinalStanding.objects.filter(board=league_board(season))
        .order_by("rank")
        .values_list("player_id", flat=True)
    )


def _waiting_for_a_lock() -> int:
    with psycopg.connect(subprocess_database_url(), autocommit=True) as other:
        row = other.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'"
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_batch_storing_during_the_close_out_waits_for_it_and_is_dead_lettered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A closing season still takes results; once its close-out holds the season, a batch of
    the season waits for the close-out's commit, then reads the season closed and dead-letters
    its results: stored meanwhile (FOR NO KEY UPDATE let the batch through), one was in
    PostgreSQL and in the history but in no final standing."""
    schedule = make_league(size=2, promote=50, relegate=50)
    one = open_season(schedule, 1)
    play(one, [(1, 90, 1), (2, 10, 2)])
    open_season(schedule, 2)
    compute = close_out_module.board_standings_compute
    batches: list[tuple[threading.Thread, list[object]]] = []

    def standings_then_a_batch(*, board: BoardRef, limit: int) -> list[StandingRow]:
        rows = compute(board=board, limit=limit)
        if board.slug == "league" and not batches:
            batches.append(_in_thread(lambda: _batch(one, [(2, 500, 3)])))
            wait_until(lambda: _waiting_for_a_lock() >= 1, timeout=30)
            assert batches[0][1] == []  # still waiting for the close-out
        return rows

    monkeypatch.setattr(close_out_module, "board_standings_compute", standings_then_a_batch)
    close(one)
    thread, out = batches[0]
    thread.join(timeout=60)
    assert out == [["season_closed"]], out
    assert not MatchResult.objects.filter(season=one, player_id=2, points=500).exists()
    assert _standings_order(one) == [1, 2]
    assert movements(one) == {1: ("bronze", P, 1), 2: ("bronze", S, 2)}


def test_a_close_out_that_finds_a_batch_of_the_season_storing_is_in_progress() -> None:
    """The batch was checked and is storing: its results are the season's, so the close-out
    leaves it to finish rather than rank without them; the rerun counts them."""
    schedule = make_league(size=2, promote=50, relegate=50)
    one = open_season(schedule, 1)
    play(one, [(1, 90, 1), (2, 10, 2)])
    open_season(schedule, 2)
    with psycopg.connect(subprocess_database_url()) as batch:  # a consumer's store, mid-batch
        batch.execute(LOCK_BOARDS_SQL, ["closed", [league_board(one).id]])
        result = season_close(season_id=one.id, force=True, now=one.ends_at + timedelta(seconds=1))
        assert result.outcome == CloseOutcome.IN_PROGRESS, result.describe()
        batch.rollback()
    close(one)
    assert _standings_order(one) == [1, 2]


def test_a_void_during_the_close_out_waits_for_it_and_asks_for_the_standings_review(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A correction holds the season FOR SHARE: one asked for while the close-out finalizes
    waits for its commit, then finds the season closed and asks for the review, rather than
    landing between the standings and the movements and counting in neither."""
    schedule = make_league(size=2, promote=50, relegate=50)
    one = open_season(schedule, 1)
    play(one, [(1, 90, 1), (2, 10, 2)])
    open_season(schedule, 2)
    winner = MatchResult.objects.get(season=one, player_id=1)
    compute = close_out_module.board_standings_compute
    voids: list[tuple[threading.Thread, list[object]]] = []

    def void() -> BoardsCorrected:
        correction = match_result_void(result_id=winner.id, reason="cheated")
        return boards_correct(season_id=correction.season_id, days=correction.days)

    def standings_during_a_void(*, board: BoardRef, limit: int) -> list[StandingRow]:
        rows = compute(board=board, limit=limit)
        if board.slug != "league":
            return rows
        voids.append(_in_thread(void))
        # Polled from a connection of its own: this one is inside the close-out's transaction,
        # whose view of pg_stat_activity stays as it was at its first look.
        with psycopg.connect(subprocess_database_url(), autocommit=True) as watcher:
            wait_until(lambda: _waiting_on_a_lock("FOR SHARE", on=watcher), timeout=30)
        return rows

    monkeypatch.setattr(close_out_module, "board_standings_compute", standings_during_a_void)
    close(one)
    ((thread, out),) = voids
    thread.join(timeout=60)
    (corrected,) = out
    assert isinstance(corrected, BoardsCorrected), corrected
    assert corrected.needs_standings_review
    winner.refresh_from_db()
    assert winner.voided_at is not None
    assert _standings_order(one) == [1, 2]
    assert movements(one) == {1: ("bronze", P, 1), 2: ("bronze", S, 2)}


def reference_movements(
    cohorts: dict[int, tuple[int | None, list[int]]], scores: dict[int, tuple[int, int]]
) -> dict[int, tuple[int, str]]:
    """An independent statement of the rule: per cohort, the members with a score sorted best
    first (more points, then earlier); ``k`` up = floor(n * 40 / 100) by position, extended to
    everyone tied with the last one; ``k`` down from the bottom, dropping a group tied across
    the boundary; the ends clamp."""
    out: dict[int, tuple[int, str]] = {}
    for cohort_tier, members in cohorts.values():
        tier = cohort_tier or 0
        played = sorted(
            (p for p in members if p in scores), key=lambda p: (-scores[p][0], scores[p][1])
        )
        n = len(played)
        up, down = n * 40 // 100, n * 40 // 100
        promoted = set(played[:up])
        if up:
            promoted |= {p for p in played if scores[p] == scores[played[up - 1]]}
        relegated = set(played[n - down :]) if down else set()
        if down:
            boundary = played[n - down]
            if any(scores[p] == scores[boundary] for p in played[: n - down]):
                relegated -= {p for p in played if scores[p] == scores[boundary]}
        for p in played:
            if p in promoted and tier < 2:
                out[p] = (tier, Movement.PROMOTED)
            elif p in relegated and tier > 0:
                out[p] = (tier, Movement.RELEGATED)
            else:
                out[p] = (tier, Movement.STAYED)
    return out


def test_movements_match_a_reference_over_three_random_seasons() -> None:
    """Random players (some skip seasons), coarse points and seconds (many exact ties), cohorts
    of 7: every close-out's movements equal the reference's, every next season places each
    player by their latest movement, and the cohort assignment invariants hold (a partition of
    the players, one tier per cohort, none over the size, only each tier's newest not full)."""
    rng = random.Random(11)
    schedule = make_league(size=7)
    seasons = [open_season(schedule, 1)]
    expected_tier: dict[int, int] = {}
    for number in range(1, 4):
        season = seasons[-1]
        players = rng.sample(range(1, 61), 45)
        results = [(p, rng.choice([10, 20, 20, 30]), rng.choice([1, 2])) for p in players]
        play(season, results)
        board = league_board(season)
        members = dict(
            CohortMember.objects.filter(board=board).values_list("player_id", "cohort_id")
        )
        cohorts = {c.id: (c.tier, c) for c in Cohort.objects.filter(board=board)}
        # Partition, size bound, one tier per cohort, the tier each player earned.
        assert set(members) == set(players)
        fill = Counter(members.values())
        assert all(n <= 7 for n in fill.values())
        for tier in {t for t, _ in cohorts.values()}:
            of_tier = sorted(c.number for t, c in cohorts.values() if t == tier)
            assert all(
                fill[c.id] == 7
                for t, c in cohorts.values()
                if t == tier and c.number != of_tier[-1]
            )
        for player, cohort_id in members.items():
            assert cohorts[cohort_id][0] == expected_tier.get(player, 0), (number, player)
        if number < 3:
            seasons.append(open_season(schedule, number + 1))
        close(season)
        scores = {p: (pts, sec) for p, pts, sec in results}
        by_cohort = {
            cid: (tier, [p for p, c in members.items() if c == cid])
            for cid, (tier, _) in cohorts.items()
        }
        want = reference_movements(by_cohort, scores)
        got = {
            m.player_id: (m.tier, m.movement) for m in LeagueMovement.objects.filter(board=board)
        }
        assert got == want, number
        step: dict[str, int] = {Movement.PROMOTED: 1, Movement.RELEGATED: -1, Movement.STAYED: 0}
        for player, (tier, movement) in got.items():
            expected_tier[player] = tier + step[movement]
    # The rule as the cohort reads state it (seasons.leagues.league_movement) is the same one.
    assert (
        league_movement(rank=3, players=5, tier=0, tiers=3, promote_percent=40, relegate_percent=40)
        == S
    )
    assert (
        league_movement(rank=2, players=5, tier=2, tiers=3, promote_percent=40, relegate_percent=40)
        == S
    )
    assert (
        league_movement(rank=4, players=5, tier=1, tiers=3, promote_percent=40, relegate_percent=40)
        == R
    )


@pytest.mark.parametrize("seed", range(5))
def test_the_movements_a_cohort_read_states_follow_the_reference_rule(seed: int) -> None:
    """``league_movements`` (every entry of a cohort read) against the independent statement
    of the rule, on cohorts of every size up to 30 with many ties, in each of three tiers."""
    rng = random.Random(seed)
    for n in range(1, 31):
        scores = {p: (rng.randint(0, 4), rng.randint(0, 1)) for p in range(1, n + 1)}
        played = sorted(scores, key=lambda p: (-scores[p][0], scores[p][1]))
        key = {p: (-scores[p][0], scores[p][1]) for p in played}
        # Competition ranks, best first: one more than the members strictly ahead.
        ranks = [1 + sum(key[q] < key[p] for q in played) for p in played]
        for tier in range(3):
            got = league_movements(
                ranks=ranks,
                players=n,
                tier=tier,
                tiers=3,
                promote_percent=40,
                relegate_percent=40,
            )
            want = reference_movements({1: (tier, played)}, scores)
            assert dict(zip(played, got, strict=True)) == {
                p: movement for p, (_, movement) in want.items()
            }, (seed, n, tier)


def test_create_schedule_takes_a_league_and_refuses_one_it_cannot_run() -> None:
    template = SeasonFactory.create(
        starts_at=T0 - timedelta(days=30), ends_at=T0 - timedelta(days=1)
    )
    base = [
        "create_schedule",
        "--name",
        "League",
        "--cron",
        "0 0 * * 1",
        "--template-season",
        str(template.id),
    ]
    with pytest.raises(CommandError, match="no board with cohorts"):
        call_command(*base, "--slug", "a", "--tiers", "bronze,silver")
    board_factory(template, "league", cohort_size=20)
    refused = {
        ("--tiers", "gold"): "2 to 10 tiers",
        ("--tiers", "bronze,bronze"): "repeat",
        ("--tiers", "Bronze,silver"): "tier name 'Bronze'",
        ("--tiers", "a,b", "--promote", "60", "--relegate", "50"): "more than a cohort",
        ("--tiers", "a,b", "--promote", "101"): "0 to 100",
        ("--promote", "20"): "need --tiers",
    }
    for args, message in refused.items():
        with pytest.raises(CommandError, match=message):
            call_command(*base, "--slug", "b", *args)
    out = StringIO()
    call_command(
        *base,
        "--slug",
        "league",
        "--tiers",
        "bronze, silver ,gold",
        "--promote",
        "20",
        "--relegate",
        "10",
        stdout=out,
    )
    schedule = Schedule.objects.get(slug="league")
    assert (schedule.tiers, schedule.promote_percent, schedule.relegate_percent) == (
        list(TIERS),
        20,
        10,
    )
    assert "a league of tiers bronze, silver, gold" in out.getvalue()
    # Only its boards with cohorts are league boards.
    Schedule.objects.filter(id=schedule.id).update(starts_from=T0 - timedelta(minutes=1))
    schedule.refresh_from_db()
    season = open_season(schedule, 1)
    boards = {b.slug: (b.tiers, b.promote_percent) for b in Board.objects.filter(season=season)}
    assert boards == {"main": ([], 0), "league": (list(TIERS), 20)}


INLINE = {f"seasons-{name}": "0" for name in ("TOTAL_FORMS", "INITIAL_FORMS", "MIN_NUM_FORMS")}


def test_the_admin_runs_leagues_through_the_services_and_shows_tiers_and_movements(
    staff: Client,
) -> None:
    template = SeasonFactory.create(
        starts_at=T0 - timedelta(days=30), ends_at=T0 - timedelta(days=1)
    )
    board_factory(template, "league", cohort_size=2)
    form = {
        "slug": "admin-league",
        "name": "Admin league",
        "cron": "0 0 * * 1",
        "timezone": "UTC",
        "template_season": template.id,
        "lead_minutes": 60,
        "active": "on",
        **INLINE,
    }
    refused = staff.post(
        "/admin/seasons/schedule/add/",
        {**form, "tiers": "bronze,silver", "promote_percent": 70, "relegate_percent": 40},
    )
    assert "more than a cohort" in refused.content.decode()
    created = staff.post(
        "/admin/seasons/schedule/add/",
        {**form, "tiers": "bronze,silver", "promote_percent": 50, "relegate_percent": 50},
    )
    assert created.status_code == 302, created.content.decode()[:2000]
    schedule = Schedule.objects.get(slug="admin-league")
    assert (schedule.tiers, schedule.promote_percent) == (["bronze", "silver"], 50)
    Schedule.objects.filter(id=schedule.id).update(starts_from=T0 - timedelta(minutes=1))
    listing = staff.get("/admin/seasons/schedule/").content.decode()
    assert "bronze &lt; silver: 50% up, 50% down" in listing

    one = open_season(schedule, 1)
    play(one, [(1, 90, 1), (2, 10, 2)])
    two = open_season(schedule, 2)
    season_page = staff.get(f"/admin/seasons/season/{two.id}/change/").content.decode()
    assert "cohorts wait for the previous season&#x27;s close-out" in season_page
    close(one)
    movements_page = staff.get("/admin/leaderboard/leaguemovement/?q=1").content.decode()
    assert "promoted" in movements_page
    assert "silver" in movements_page
    play(two, [(1, 5, 1)])
    cohorts_page = staff.get("/admin/leaderboard/cohort/?q=1").content.decode()
    assert "silver" in cohorts_page

    # A change of the league is for the seasons created from now on, through the service.
    changed = staff.post(
        f"/admin/seasons/schedule/{schedule.id}/change/",
        {
            **form,
            "slug": "admin-league",
            "name": "Admin league",
            "tiers": "bronze,silver,gold",
            "promote_percent": 50,
            "relegate_percent": 0,
            "seasons-TOTAL_FORMS": "0",
            "seasons-INITIAL_FORMS": "0",
        },
    )
    assert changed.status_code == 302, changed.content.decode()[:2000]
    schedule.refresh_from_db()
    assert (schedule.tiers, schedule.relegate_percent) == (list(TIERS), 0)
    assert league_board(two).tiers == ["bronze", "silver"]  # the running season keeps its own


def test_the_pages_show_tiers_groups_and_movements(client: Client) -> None:
    schedule = make_league(size=3, promote=34, relegate=34)
    one = open_season(schedule, 1)
    play(one, [(1, 90, 1), (2, 50, 2), (3, 10, 3)])
    two = open_season(schedule, 2)
    waiting = client.get(f"/seasons/{two.id}/boards/league").content.decode()
    assert f'Groups form once season <a href="/seasons/{one.id}">{one.id}</a> has closed' in (
        waiting
    )
    close(one)
    play(two, [(1, 40, 1), (2, 50, 2), (3, 60, 3), (4, 70, 4)])

    page = client.get(f"/seasons/{two.id}/boards/league?player=1").content.decode()
    assert "League: <span" in page
    assert "each group's top 34% move up" in page
    assert '<th scope="col">Tier</th>' in page
    assert '<td class="tier">silver</td>' in page
    assert 'data-tiers="1"' in page  # live.js keeps the column
    assert 'Your group: <a href="' in page
    assert '<span class="tier">silver</span> league' in page
    assert "If the season ended now" in page
    group = client.get(f"/seasons/{two.id}/boards/league?player=3").content.decode()
    group = group[group.index('data-cohort="') :]
    group = group[: group.index("</table>")]
    # Bronze's group {2, 3, 4}: 4 would go up; nobody goes down from the bottom tier.
    assert '<td class="movement promoted">&#9650; up to the next tier</td>' in group
    assert "relegated" not in group

    three = open_season(schedule, 3)
    close(two)
    del three
    season_history_archive(season_id=one.id)
    schedule_page = client.get("/schedules/weekly-league").content.decode()
    assert "A league in 3 tiers" in schedule_page
    table = schedule_page[schedule_page.index('data-board="league"') :]
    table = table[: table.index("</table>")]
    # Season 2 (newest first): silver's group {1} and bronze's {2, 3, 4}.
    assert '<tr data-tier="bronze"><td class="tier">bronze</td><td class="num">1</td>' in table
    history = client.get("/players/1/history").content.decode()
    assert '<span class="tier">bronze</span> &#9650; promoted' in history


def test_a_league_whose_percent_moves_nobody_from_a_full_cohort_is_refused() -> None:
    """Movers per cohort are rounded down: 20% of 4 is nobody, a ladder nobody ever moves on."""
    with pytest.raises(ValidationError, match="--promote 20% of a cohort of 4 moves nobody"):
        make_league(size=4, promote=20, relegate=25)
    with pytest.raises(ValidationError, match="--relegate 10% of a cohort of 9 moves nobody"):
        make_league(size=9, promote=12, relegate=10)
    assert make_league(size=4, promote=25, relegate=25).promote_percent == 25
