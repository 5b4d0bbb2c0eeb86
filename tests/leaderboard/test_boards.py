"""Boards of every order and rule, through ingestion and the HTTP API, against a reference.

Results go through ``match_results_ingest`` (the consumer's batch handler: validation,
PostgreSQL, then Redis) and are read back through every endpoint under
``/api/seasons/{season}/boards/{board}/...``. The expected answers come from
``tests.helpers.expected_board``, a statement of the rules in Python, ranked here the way the
contract defines ranks (equal encoded scores share a rank; Redis orders them by member).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ingestion.records import ConsumedRecord, DeadLetter
from ingestion.services import match_results_ingest
from leaderboard.models import Board, BoardOrder, MatchResult, ScoringRule
from leaderboard.services import board_rebuild
from seasons.models import SeasonStatus
from tests.factories import board_factory
from tests.helpers import as_board, expected_board, make_season, mark_intact

from ..ingestion.ingest_helpers import Result

pytestmark = pytest.mark.django_db(transaction=True)

TOPIC = "boards-test"
START = datetime(2026, 10, 1, tzinfo=UTC)
KINDS = [(order, rule) for order in BoardOrder.values for rule in ScoringRule.values]
# Players without a profile: no name on their entries.
NO_NAME = {"displayName": None, "country": None}


def slug(order: str, rule: str) -> str:
    return f"{order}-{rule}"


class _Letters:
    def __init__(self) -> None:
        self.letters: list[DeadLetter] = []

    def publish(self, *, letters: Sequence[DeadLetter]) -> None:
        self.letters += letters


@pytest.fixture
def kinds_season(board_redis):
    """An active season with a board of every order and rule (KINDS), marked intact."""
    season = make_season(starts_at=START, ends_at=START + timedelta(days=60))
    season.status = SeasonStatus.ACTIVE
    season.save(update_fields=["status"])
    for order, rule in KINDS:
        board_factory(season, slug(order, rule), order=order, rule=rule)
    mark_intact(season)
    return season


def random_results(season, *, seed: int, players: int = 25, per_board: int = 160) -> list[Result]:
    """Results on every board: few distinct points and ticks (ties), two days, several
    results per player and match, some sharing an achieved_at (the latest rule's tie)."""
    rng = random.Random(seed)
    results: list[Result] = []
    moments = [START + timedelta(days=2, hours=h, seconds=rng.choice([0, 0, 1])) for h in range(30)]
    for order, rule in KINDS:
        for _ in range(per_board):
            results.append(
                Result(
                    uuid.UUID(int=rng.getrandbits(128), version=4),
                    rng.randint(1, players),
                    season.id,
                    rng.choice([10, 20, 20, 30, 40]),
                    rng.choice(moments),
                    board=slug(order, rule),
                )
            )
    return results


def ingest(results: Sequence[Result], *, first_offset: int = 0, partition: int = 0) -> _Letters:
    letters = _Letters()
    records = [
        ConsumedRecord(partition, first_offset + n, r.key(), r.value())
        for n, r in enumerate(results)
    ]
    for start in range(0, len(records), 97):
        match_results_ingest(topic=TOPIC, records=records[start : start + 97], dead_letters=letters)
    assert letters.letters == []
    return letters


def ranking(board, scores: dict[int, int]) -> list[dict[str, Any]]:
    """The contract's entries for a board holding ``scores`` (player -> encoded score)."""
    codec = as_board(board).codec
    # Redis: score descending, then member (as bytes) descending among equal scores.
    ordered = sorted(scores.items(), key=lambda item: (item[1], str(item[0])), reverse=True)
    entries: list[dict[str, Any]] = []
    previous = None
    rank = 0
    for position, (player, score) in enumerate(ordered, start=1):
        if score != previous:
            rank = position
        previous = score
        entries.append(
            {
                "rank": rank,
                "playerId": player,
                "points": codec.decode_points(score),
                "displayName": None,
                "country": None,
            }
        )
    return entries


def get(client, url: str, status: int = 200) -> Any:
    response = client.get(url)
    assert response.status_code == status, (url, response.content)
    return response.json()


@pytest.mark.parametrize(("order", "rule"), KINDS)
def test_every_endpoint_of_every_order_and_rule(client, kinds_season, order, rule) -> None:
    results = random_results(kinds_season, seed=7)
    ingest(results)
    board = Board.objects.get(season=kinds_season, slug=slug(order, rule))
    base = f"/api/seasons/{kinds_season.id}/boards/{board.slug}"
    want = ranking(board, expected_board(board, results))
    assert want, "the reference board is empty: the test would prove nothing"

    assert get(client, f"{base}/top?limit=1000") == want
    assert get(client, f"{base}/ranks?start=3&count=5") == want[2:7]
    for entry in want[:: max(1, len(want) // 6)]:
        player = entry["playerId"]
        standing = get(client, f"{base}/players/{player}")
        assert {k: standing[k] for k in entry} == entry
        position = want.index(entry)
        around = get(client, f"{base}/players/{player}/around?radius=2")
        assert around == want[max(0, position - 2) : position + 3]
    friends = [e["playerId"] for e in want[1::3]] + [999_999]
    expected_friends = [e for e in want if e["playerId"] in friends]
    got = get(client, f"{base}/friends?ids={','.join(map(str, friends))}")
    assert got == expected_friends
    day = (START + timedelta(days=2)).date()
    daily_want = ranking(board, expected_board(board, results, day=day))
    assert get(client, f"{base}/daily/{day.isoformat()}/top?limit=1000") == daily_want
    iso = day.isocalendar()
    weekly = get(client, f"{base}/weekly/{iso.year}-W{iso.week:02d}/top?limit=1000")
    # The week holds days 2 and 3 of the results (both inside one ISO week here).
    week_days = {(START + timedelta(days=2, hours=h)).date() for h in range(30)}
    assert all(d.isocalendar()[:2] == iso[:2] for d in week_days)
    assert weekly == want


def test_asc_ranks_the_lowest_first_and_ties_go_to_the_first_reached(client, kinds_season) -> None:
    at = START + timedelta(days=1)
    results = [
        Result(uuid.uuid4(), 1, kinds_season.id, 90_500, at, board="asc-best"),
        Result(
            uuid.uuid4(), 2, kinds_season.id, 88_000, at + timedelta(seconds=5), board="asc-best"
        ),
        Result(
            uuid.uuid4(), 3, kinds_season.id, 88_000, at + timedelta(seconds=1), board="asc-best"
        ),
        Result(
            uuid.uuid4(), 1, kinds_season.id, 95_000, at + timedelta(seconds=9), board="asc-best"
        ),
    ]
    ingest(results)
    top = get(client, f"/api/seasons/{kinds_season.id}/boards/asc-best/top")
    assert top == [
        {"rank": 1, "playerId": 3, "points": 88_000, **NO_NAME},
        {"rank": 2, "playerId": 2, "points": 88_000, **NO_NAME},
        {"rank": 3, "playerId": 1, "points": 90_500, **NO_NAME},
    ]
    standing = get(client, f"/api/seasons/{kinds_season.id}/boards/asc-best/players/1")
    # Down by 2,501 ms to pass player 2.
    assert standing["pointsToNextRank"] == 2_501


@pytest.mark.parametrize("order", BoardOrder.values)
def test_latest_ignores_delivery_order_and_redelivery(board_redis, kinds_season, order) -> None:
    """Each player's latest result by achieved_at holds the board (an exact tie: the greater
    match id), whatever order the results arrive in, delivered once or many times."""
    board = Board.objects.get(season=kinds_season, slug=slug(order, ScoringRule.LATEST))
    results = [r for r in random_results(kinds_season, seed=11) if r.board == board.slug]
    want = expected_board(board, results)
    rng = random.Random(3)
    shuffled = results[:]
    rng.shuffle(shuffled)
    # Oldest last for half the players, duplicates sprinkled in, in batches across partitions.
    redelivered = shuffled + rng.sample(results, len(results) // 2)
    ingest(redelivered[: len(redelivered) // 2], partition=0)
    ingest(redelivered[len(redelivered) // 2 :], partition=1)
    ingest(shuffled, partition=2)  # a whole replay on another partition
    from tests.ingestion.ingest_helpers import assert_boards_match

    assert_boards_match(board_redis, board, results)
    assert want


class _Crash(Exception):
    """The process dies here."""


@pytest.mark.parametrize(("order", "rule"), KINDS)
def test_a_crash_between_postgresql_and_redis_is_applied_once(
    board_redis, kinds_season, order, rule
) -> None:
    from tests.ingestion.ingest_helpers import assert_boards_match

    board = Board.objects.get(season=kinds_season, slug=slug(order, rule))
    results = [r for r in random_results(kinds_season, seed=5) if r.board == board.slug]
    records = [ConsumedRecord(0, n, r.key(), r.value()) for n, r in enumerate(results)]
    half = len(records) // 2
    ingest(results[:half])
    # The next batch reaches PostgreSQL, then the process dies before Redis.
    letters = _Letters()

    def crash_before_redis(what: str, operation: Callable[[], Any]) -> Any:
        if what == "Redis":
            raise _Crash
        return operation()

    with pytest.raises(_Crash):
        match_results_ingest(
            topic=TOPIC, records=records[half:], dead_letters=letters, retrying=crash_before_redis
        )
    assert MatchResult.objects.filter(board=board).count() == len(
        {(r.match_id, r.player_id) for r in results}
    )
    # Redelivered from the last committed offset: the whole second half, then once more.
    match_results_ingest(topic=TOPIC, records=records[half:], dead_letters=letters)
    match_results_ingest(topic=TOPIC, records=records[half:], dead_letters=letters)
    assert_boards_match(board_redis, board, results)


def test_rebuild_of_an_asc_board_and_its_close_out(client, board_redis, kinds_season) -> None:
    from closeout.models import FinalStanding, RewardGrant
    from closeout.services import reward_tier_create, season_close
    from leaderboard import keys

    board = Board.objects.get(season=kinds_season, slug="asc-best")
    results = random_results(kinds_season, seed=9)
    ingest(results)
    want = expected_board(board, results)
    key = keys.board(board_id=board.id)
    board_redis.delete(key)
    rebuilt = board_rebuild(board_id=board.id)
    assert rebuilt.members == len(want)
    got = {int(m): int(s) for m, s in board_redis.zrange(key, 0, -1, withscores=True)}
    assert got == want

    reward_tier_create(
        season_id=kinds_season.id,
        rank_from=1,
        rank_to=2,
        reward_name="trophy",
        board_slug="asc-best",
    )
    result = season_close(season_id=kinds_season.id, now=kinds_season.ends_at, force=True)
    assert result.outcome == "closed"
    reference = ranking(board, want)
    standings = list(FinalStanding.objects.filter(board=board).order_by("rank"))
    # Final standings break exact ties by the lower player id (distinct ranks); the points go
    # up from the best (lowest) one.
    assert [s.points for s in standings] == sorted(e["points"] for e in reference)
    assert [s.rank for s in standings] == list(range(1, len(standings) + 1))
    grants = RewardGrant.objects.filter(board=board).order_by("rank")
    assert [(g.rank, g.player_id) for g in grants] == [(s.rank, s.player_id) for s in standings[:2]]
    # Only the board the tier belongs to grants; every board has its standings.
    assert RewardGrant.objects.filter(season=kinds_season).count() == 2
    api = get(client, f"/api/seasons/{kinds_season.id}/boards/asc-best/standings")
    assert [e["points"] for e in api["entries"]] == [s.points for s in standings]


def test_boards_list_unknown_board_and_the_main_paths(client, kinds_season) -> None:
    results = random_results(kinds_season, seed=1, per_board=30)
    results += [Result(uuid.uuid4(), 5, kinds_season.id, 70, START + timedelta(days=1))]  # main
    ingest(results)
    listed = get(client, f"/api/seasons/{kinds_season.id}/boards")
    assert [b["slug"] for b in listed] == ["main", *(slug(o, r) for o, r in KINDS)]
    sizes = {b["slug"]: b["size"] for b in listed}
    assert sizes["main"] == 1
    assert sizes["desc-best"] == len({r.player_id for r in results if r.board == "desc-best"})
    assert {b["slug"]: (b["order"], b["rule"]) for b in listed}["asc-latest"] == ("asc", "latest")

    missing = get(client, f"/api/seasons/{kinds_season.id}/boards/nope/top", status=404)
    assert missing["detail"] == f"season {kinds_season.id} has no board 'nope'"
    assert get(client, "/api/seasons/999999/boards/main/top", status=404)["detail"] == (
        "season 999999 does not exist"
    )
    assert get(client, "/api/seasons/999999/boards", status=404)
    legacy = get(client, f"/api/seasons/{kinds_season.id}/leaderboard/top")
    assert legacy == get(client, f"/api/seasons/{kinds_season.id}/boards/main/top")
    assert legacy == [{"rank": 1, "playerId": 5, "points": 70, **NO_NAME}]


def test_boards_list_tells_whether_each_board_emits_rank_events(client) -> None:
    season = make_season(starts_at=START, ends_at=START + timedelta(days=30))
    board_factory(season, "quiet", rank_events=False, event_top_n=7)
    board_factory(season, "top-ten", event_top_n=10)
    listed = get(client, f"/api/seasons/{season.id}/boards")
    assert [(b["slug"], b["rankEvents"], b["eventTopN"]) for b in listed] == [
        ("main", True, 100),
        ("quiet", False, None),
        ("top-ten", True, 10),
    ]


def test_an_unknown_board_is_a_dead_letter_with_its_reason(kinds_season) -> None:
    letters = _Letters()
    bad = Result(uuid.uuid4(), 1, kinds_season.id, 10, START + timedelta(days=1), board="nope")
    match_results_ingest(
        topic=TOPIC, records=[ConsumedRecord(0, 0, bad.key(), bad.value())], dead_letters=letters
    )
    assert [(letter.code, letter.record.offset) for letter in letters.letters] == [
        ("unknown_board", 0)
    ]
