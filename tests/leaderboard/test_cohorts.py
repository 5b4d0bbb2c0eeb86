"""Cohorts (contract 0.3): every player joins one cohort at their first counted result, never
another; each cohort ranks its members exactly as the board does, with the global rank beside.

Assignment is checked against its invariants (a partition of the counted players, no cohort
over the size, only the newest one not full, numbers 1..n) under redelivery, disorder, replays,
rebuilds and concurrent batches; ranks against the reference board of tests.helpers."""

from __future__ import annotations

import random
import re
import threading
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, transaction

from leaderboard import keys
from leaderboard.models import Board, BoardOrder, Cohort, CohortMember, ScoringRule, TiebreakColumn
from leaderboard.redis import get_board_redis
from leaderboard.selectors.boards import BoardRef
from leaderboard.services import (
    ResultColumns,
    ResultRow,
    board_rebuild,
    board_update,
    match_results_store,
    player_ban,
)
from tests.factories import board_factory
from tests.helpers import expected_board, make_season
from tests.ingestion.ingest_helpers import LetterSink, Result, ingest_redelivered

pytestmark = pytest.mark.django_db(transaction=True)

TOPIC = "cohort-test"
START = datetime(2026, 3, 2, tzinfo=UTC)


def _season():
    return make_season(starts_at=START - timedelta(days=1), ends_at=START + timedelta(days=30))


def _results(season_id: int, board: str, rng: random.Random, players: range, each: int = 3):
    # Few distinct points and times: ties on the whole key happen.
    return [
        Result(
            uuid.uuid4(),
            player,
            season_id,
            rng.choice([1, 5, 5, 9]),
            START + timedelta(hours=rng.choice([1, 2]), seconds=rng.choice([0, 3])),
            board=board,
        )
        for player in players
        for _ in range(each)
    ]


def _ingest(results: list[Result], rng: random.Random, batch: int = 9) -> LetterSink:
    return ingest_redelivered(
        topic=TOPIC, deliveries=[(r.player_id, r.value()) for r in results], rng=rng, batch=batch
    )


def _membership(board_id: int) -> dict[int, int]:
    """player -> cohort number."""
    return dict(
        CohortMember.objects.filter(board_id=board_id).values_list("player_id", "cohort__number")
    )


def _assert_invariants(board: Board, players: set[int]) -> dict[int, int]:
    members = _membership(board.id)
    assert set(members) == players  # every counted player, once (a partition)
    size = board.cohort_size
    assert size is not None
    fill = Counter(members.values())
    cohorts = {c.number: c.members for c in Cohort.objects.filter(board=board)}
    assert sorted(cohorts) == list(range(1, len(cohorts) + 1))
    assert cohorts == dict(fill)  # the recorded fill is the true one
    newest = max(cohorts)
    assert all(n <= size for n in cohorts.values())
    assert all(n == size for number, n in cohorts.items() if number != newest)
    assert len(cohorts) == -(-len(players) // size)
    return members


def test_assignment_is_a_partition_that_replays_and_rebuilds_keep() -> None:
    rng = random.Random(7)
    season = _season()
    board = board_factory(season, "groups", cohort_size=7)
    results = _results(season.id, "groups", rng, range(1, 61))
    assert _ingest(results, rng).letters == []
    before = _assert_invariants(board, set(range(1, 61)))

    # Redis lost the board and it is rebuilt from PostgreSQL; then everything is consumed
    # again from the start of the topic (a replay): nobody moves.
    redis = get_board_redis()
    redis.delete(keys.board(board_id=board.id))
    board_rebuild(board_id=board.id)
    redis.delete(keys.ingest_applied_offsets(board_id=board.id, topic=TOPIC))
    _ingest(results, rng, batch=13)
    assert _membership(board.id) == before

    # Newcomers fill the open cohort, then open the next ones.
    _ingest(_results(season.id, "groups", rng, range(61, 75), each=1), rng)
    after = _assert_invariants(board, set(range(1, 75)))
    assert {p: after[p] for p in before} == before


def test_a_banned_players_results_give_no_cohort_and_other_boards_none() -> None:
    rng = random.Random(3)
    season = _season()
    board = board_factory(season, "groups", cohort_size=5)
    player_ban(season_id=season.id, player_id=2, reason="cheat")
    _ingest(_results(season.id, "groups", rng, range(1, 5)), rng)
    _ingest(_results(season.id, "main", rng, range(1, 5)), rng)
    assert set(_membership(board.id)) == {1, 3, 4}
    assert CohortMember.objects.exclude(board=board).count() == 0


def test_concurrent_batches_fill_each_cohort_to_its_size_exactly() -> None:
    season = _season()
    board = board_factory(season, "groups", cohort_size=9)
    threads, errors = 8, []
    barrier = threading.Barrier(threads)

    def store(worker: int) -> None:
        try:
            rows = [
                ResultRow(
                    uuid.uuid4(),
                    1000 * worker + i,
                    season.id,
                    board.id,
                    i,
                    START + timedelta(minutes=i),
                    worker,
                    i,
                )
                for i in range(1, 31)
            ]
            barrier.wait()
            for start in range(0, len(rows), 10):
                match_results_store(results=ResultColumns.of(rows[start : start + 10]))
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    pool = [threading.Thread(target=store, args=(w,)) for w in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    assert errors == []
    players = {1000 * w + i for w in range(threads) for i in range(1, 31)}
    _assert_invariants(board, players)


SPECS = [
    (rule, order, tiebreaks)
    for rule in ScoringRule.values
    for order in BoardOrder.values
    for tiebreaks in ((), (TiebreakColumn("kills", "desc"),))
]


@pytest.mark.parametrize(
    ("rule", "order", "tiebreaks"),
    SPECS,
    ids=[f"{r}-{o}-{len(t)}" for r, o, t in SPECS],
)
def test_cohort_ranks_are_the_boards_within_the_cohort(client, rule, order, tiebreaks) -> None:
    rng = random.Random(f"{rule}{order}{len(tiebreaks)}")
    season = _season()
    board = board_factory(
        season, "groups", rule=rule, order=order, cohort_size=6, tiebreaks=tiebreaks
    )
    ref = BoardRef.from_model(board)
    results = _results(season.id, "groups", rng, range(1, 21))
    if tiebreaks:
        # Every result gets the same kills: the board's order is then the plain one's, which
        # the reference computes (tie-break columns are checked in test_tiebreak_boards.py).
        values = [r.value().replace(b"}", b', "tiebreakers": {"kills": 1}}') for r in results]
        letters = ingest_redelivered(
            topic=TOPIC,
            deliveries=[(r.player_id, v) for r, v in zip(results, values, strict=True)],
            rng=rng,
        )
    else:
        letters = _ingest(results, rng)
    assert letters.letters == []
    scores = expected_board(ref, results)
    members = _membership(board.id)
    base = f"/api/seasons/{season.id}/boards/groups"
    for number in sorted(set(members.values())):
        cohort = [p for p, n in members.items() if n == number]
        global_rank = {p: 1 + sum(1 for s in scores.values() if s > scores[p]) for p in cohort}
        ordered = sorted(cohort, key=lambda p: (global_rank[p], p))
        want = [
            {
                "rank": 1 + sum(1 for q in cohort if global_rank[q] < global_rank[p]),
                "globalRank": global_rank[p],
                "playerId": p,
            }
            for p in ordered
        ]
        got = client.get(f"{base}/cohorts/{number}/top?limit=50")
        assert got.status_code == 200, got.content
        body = got.json()
        assert (body["cohort"], body["size"], body["members"], body["tier"]) == (
            number,
            6,
            len(cohort),
            None,
        )
        shape = [{k: e[k] for k in ("rank", "globalRank", "playerId")} for e in body["entries"]]
        # Within an exact tie the order is the board's own (member order): compare as sets.
        assert sorted(shape, key=lambda e: (e["rank"], e["playerId"])) == want
        for entry in body["entries"]:
            assert (
                entry["points"]
                == client.get(f"{base}/players/{entry['playerId']}").json()["points"]
            )
        mine = client.get(f"{base}/players/{cohort[0]}/cohort").json()
        assert mine == body
        top2 = client.get(f"{base}/cohorts/{number}/top?limit=2").json()
        assert top2["entries"] == body["entries"][:2]


def test_cohort_endpoints_answer_clear_errors(client) -> None:
    rng = random.Random(1)
    season = _season()
    board_factory(season, "groups", cohort_size=4)
    _ingest(_results(season.id, "groups", rng, range(1, 4), each=1), rng)
    base = f"/api/seasons/{season.id}"
    cases = {
        f"{base}/boards/main/players/1/cohort": (404, "has no cohorts"),
        f"{base}/boards/groups/players/99/cohort": (404, "is in no cohort"),
        f"{base}/boards/groups/cohorts/2/top": (404, "has no cohort 2"),
        f"{base}/boards/groups/cohorts/0/top": (400, "cohort"),
        f"{base}/boards/groups/cohorts/1/top?limit=0": (400, "limit"),
        f"{base}/boards/nope/cohorts/1/top": (404, "no board"),
    }
    for path, (status, message) in cases.items():
        response = client.get(path)
        assert response.status_code == status, (path, response.content)
        assert message in response.json()["detail"], path
    boards = {b["slug"]: b for b in client.get(f"{base}/boards").json()}
    assert boards["groups"]["cohortSize"] == 4
    assert boards["main"]["cohortSize"] is None


def test_create_board_takes_a_cohort_size_fixed_once_the_board_has_results() -> None:
    season = _season()
    out = StringIO()
    call_command(
        "create_board",
        "--season",
        str(season.id),
        "--slug",
        "groups",
        "--name",
        "Groups",
        "--cohort-size",
        "50",
        stdout=out,
    )
    board = Board.objects.get(season=season, slug="groups")
    assert board.cohort_size == 50
    for bad in ("1", "1001"):
        with pytest.raises(CommandError, match="cohort size must be 2 to 1000"):
            call_command(
                "create_board",
                "--season",
                str(season.id),
                "--slug",
                f"g{bad}",
                "--name",
                "G",
                "--cohort-size",
                bad,
            )
    rng = random.Random(4)
    _ingest(_results(season.id, "groups", rng, range(1, 3), each=1), rng)
    with pytest.raises(ValidationError, match="cohort_size can no longer change"):
        board_update(
            board_id=board.id,
            name="Groups",
            slug="groups",
            order=board.order,
            rule=board.rule,
            time_resolution_seconds=1,
            cohort_size=20,
        )


def test_the_board_page_shows_the_players_group_and_each_group_has_its_page(client) -> None:
    rng = random.Random(9)
    season = _season()
    board_factory(season, "groups", cohort_size=3)
    _ingest(_results(season.id, "groups", rng, range(1, 8), each=1), rng)
    members = _membership(Board.objects.get(season=season, slug="groups").id)
    page = client.get(f"/seasons/{season.id}/boards/groups?player=5").content.decode()
    assert "players ranked in groups of 3 too" in page
    mine = members[5]
    assert f'Your group: <a href="/seasons/{season.id}/boards/groups/cohorts/{mine}">' in page
    group = page[page.index('data-cohort="') :]
    group = group[: group.index("</table>")]
    assert sorted(int(p) for p in re.findall(r'data-player="(\d+)"', group)) == sorted(
        p for p, n in members.items() if n == mine
    )
    assert '<tr data-player="5" class="me">' in group

    first = client.get(f"/seasons/{season.id}/boards/groups/cohorts/1")
    assert first.status_code == 200
    html = first.content.decode()
    assert "group 1: 3 of 3 players" in html
    assert "Global rank" in html
    assert f'href="/seasons/{season.id}/boards/groups/cohorts/2" rel="next"' in html
    last = client.get(f"/seasons/{season.id}/boards/groups/cohorts/3").content.decode()
    assert "group 3: 1 of 3 players" in last
    assert 'rel="next"' not in last
    assert client.get(f"/seasons/{season.id}/boards/groups/cohorts/4").status_code == 404
    assert client.get(f"/seasons/{season.id}/boards/main/cohorts/1").status_code == 404


def test_players_known_in_a_cohort_are_not_asked_about_again() -> None:
    from django.test.utils import CaptureQueriesContext

    from leaderboard.services.cohorts import KNOWN_MEMBERS

    season = _season()
    board = board_factory(season, "groups", cohort_size=4)
    offsets = iter(range(1_000))

    def store(players: list[int]) -> list[str]:
        rows = [
            ResultRow(uuid.uuid4(), p, season.id, board.id, 5, START, 0, next(offsets))
            for p in players
        ]
        with CaptureQueriesContext(connection) as queries:
            match_results_store(results=ResultColumns.of(rows))
        return [q["sql"] for q in queries.captured_queries if "cohortmember" in q["sql"]]

    store([1, 2, 3])
    # Committed: the three are members, and this process knows it.
    assert store([3, 2, 1]) == []
    # A newcomer among them: only the newcomer is asked about, and joins the open cohort.
    asked = store([2, 9, 1])
    assert asked
    assert all("{9}" in sql for sql in asked if "unnest" in sql)
    assert _membership(board.id) == {1: 1, 2: 1, 3: 1, 9: 1}

    # A batch that rolls back leaves its newcomers unknown: the next one assigns them.
    class Abort(Exception):
        pass

    def store_then_abort() -> None:
        with transaction.atomic():
            store([20])
            raise Abort

    with pytest.raises(Abort):
        store_then_abort()
    assert 20 not in _membership(board.id)
    store([20])
    assert _membership(board.id)[20] == 2

    # Forgotten (a full memo is emptied whole): asked again, and nobody moves.
    KNOWN_MEMBERS.clear()
    assert store([1, 2, 3, 9, 20]) != []
    assert _membership(board.id) == {1: 1, 2: 1, 3: 1, 9: 1, 20: 2}
