"""Rank events from the apply scripts (apply_results.lua, wide_apply.lua), through
board_results_apply against the real Redis (no database), checked against a reference that
ranks every player before and after each result (rank_events_reference.py)."""

from __future__ import annotations

import json
import random
import uuid
from collections import Counter
from datetime import UTC, date, datetime
from typing import Any

import pytest

from leaderboard import keys
from leaderboard.models import BoardOrder, ScoringRule, TiebreakColumn, board_codec
from leaderboard.rank_events import match_result_cause, outbox_messages
from leaderboard.selectors.boards import BoardRef
from leaderboard.selectors.events import rank_events_outbox_read
from leaderboard.services import (
    BoardsApplied,
    CountedResult,
    board_results_apply,
    rank_events_outbox_trim,
)
from seasons.selectors import SeasonRef

from .rank_events_reference import EventsReference, RefResult

TOPIC = "events-test"
BOARD = 79
SEASON = 7
DAY = date(2026, 10, 2)
STARTS_AT = datetime(2026, 10, 1, tzinfo=UTC)


def make_board(
    *,
    rule: str = ScoringRule.BEST,
    order: str = BoardOrder.DESC,
    columns: tuple[str, ...] = (),
    top_n: int = 3,
    events: bool = True,
) -> BoardRef:
    season = SeasonRef(
        id=SEASON,
        name="S7",
        status="active",
        starts_at=STARTS_AT,
        ends_at=datetime(2026, 12, 30, tzinfo=UTC),
    )
    codec = board_codec(time_bits=23, resolution_seconds=1, ascending=order == BoardOrder.ASC)
    return BoardRef(
        id=BOARD,
        slug="main",
        name="Main",
        order=order,
        rule=rule,
        codec=codec,
        season=season,
        tiebreaks=tuple(TiebreakColumn(f"c{i}", o) for i, o in enumerate(columns)),
        rank_events=events,
        event_top_n=top_n,
    )


@pytest.fixture
def intact(board_redis) -> None:
    """The board is whole (as the recovery marks it): its results emit events."""
    board_redis.set(keys.board_intact(board_id=BOARD), "1")


def reference_of(board: BoardRef) -> EventsReference:
    wide = board.wide_codec
    ascending = wide.ascending if wide is not None else (board.ascending,)
    return EventsReference(
        rule=board.rule,
        ascending=ascending,
        top_n=board.event_top_n,
        topic=TOPIC,
        board_id=board.id,
        season_id=board.season_id,
        slug=board.slug,
    )


def counted(r: RefResult) -> CountedResult:
    return CountedResult(
        partition=r.partition,
        offset=r.offset,
        board_id=BOARD,
        player_id=r.player,
        points=r.values[0],
        ticks=r.ticks,
        day=DAY,
        xid=1000 + r.offset,
        tiebreakers=r.values[1:],
        match_id=uuid.UUID(r.match_id),
        at=r.at,
    )


def ref_result(offset: int, player: int, values: tuple[int, ...], ticks: int) -> RefResult:
    return RefResult(
        partition=0,
        offset=offset,
        player=player,
        values=values,
        ticks=ticks,
        match_id=str(uuid.UUID(int=offset + 1)),
        at=int(STARTS_AT.timestamp()) + 3_600 + offset,
    )


def apply(board: BoardRef, results: list[RefResult]) -> BoardsApplied:
    return board_results_apply(
        topic=TOPIC,
        results=[counted(r) for r in results],
        handled_offsets={0: max(r.offset for r in results)},
        boards={board.id: board},
    )


def events_of(outcome: BoardsApplied) -> list[dict[str, Any]]:
    """The events of the outbox entries, each checked to be keyed by its player."""
    events = []
    for entry in outcome.events:
        for key, value in outbox_messages(entry.payload):
            event = json.loads(value)
            assert key == str(event["playerId"]).encode()
            events.append(event)
    return events


def by_id(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    ids = Counter(e["eventId"] for e in events)
    assert not [i for i, n in ids.items() if n > 1], "an event id repeats"
    return {e["eventId"]: e for e in events}


# --- the contract's sequences, by hand ---------------------------------------------------------


@pytest.mark.parametrize("columns", [(), ("kills",)], ids=["plain", "tie-break"])
def test_player_ids_past_2_to_the_53_are_exact_in_every_field(board_redis, intact, columns) -> None:
    # Steam64 ids, and the largest id a result may carry: a double holds neither exactly.
    steam, largest = 76561198012345679, 2**63 - 1
    board = make_board(columns=columns, top_n=1)
    ref = reference_of(board)
    zeros = (0,) * len(columns)
    results = [
        ref_result(0, steam, (50, *zeros), 100),
        ref_result(1, largest, (40, *zeros), 101),
        ref_result(2, largest, (60, *zeros), 102),  # passes steam, pushes them out of the top
        ref_result(3, steam, (70, *zeros), 103),  # and back
    ]
    got: list[dict[str, Any]] = []
    for r in results:
        step = events_of(apply(board, [r]))
        assert by_id(step) == by_id(ref.apply(r))
        got += step
    others = {(e["type"], e["playerId"], e["otherPlayerId"]) for e in got if e["otherPlayerId"]}
    assert others == {
        ("overtaken", steam, largest),
        ("left_top", steam, largest),
        ("overtaken", largest, steam),
        ("left_top", largest, steam),
    }


def test_a_first_entry_a_pass_a_worse_result_and_the_top(board_redis, intact) -> None:
    board = make_board(top_n=2)
    ref = reference_of(board)

    def step(offset: int, player: int, points: int) -> list[dict[str, Any]]:
        r = ref_result(offset, player, (points,), 100 + offset)
        got = events_of(apply(board, [r]))
        assert by_id(got) == by_id(ref.apply(r))
        return got

    first = step(0, 1, 50)
    assert {e["type"] for e in first} == {"personal_best", "rank_changed", "entered_top"}
    assert all(e["previousRank"] is None and e["rank"] == 1 for e in first)
    step(1, 2, 40)  # second, also in the top 2
    third = step(2, 3, 30)  # third: outside the top 2, nobody passed
    assert {e["type"] for e in third} == {"personal_best", "rank_changed"}

    # Player 3 passes player 2 (and enters the top 2, pushing player 2 out).
    passing = {e["type"]: e for e in step(3, 3, 45)}
    assert passing["overtaken"]["playerId"] == 2
    assert passing["overtaken"]["otherPlayerId"] == 3
    assert (passing["overtaken"]["rank"], passing["overtaken"]["previousRank"]) == (3, 2)
    assert passing["left_top"]["playerId"] == 2
    assert passing["left_top"]["otherPlayerId"] == 3
    assert passing["entered_top"]["playerId"] == 3
    assert (passing["rank_changed"]["rank"], passing["rank_changed"]["previousRank"]) == (2, 3)

    # A worse result emits nothing (best rule), and neither does one that only equals.
    assert step(4, 3, 10) == []
    assert step(5, 1, 50) == []
    assert board_redis.xlen(keys.rank_events_outbox(board_id=BOARD, topic=TOPIC, partition=0)) == 4


def test_a_pass_onto_a_tied_value_and_onto_one_alone(board_redis, intact) -> None:
    """The player right below and their rank, whether the new value is shared (identical
    points in the same tick: a shared rank) or held alone (one call answers both then)."""
    board = make_board(top_n=10)
    ref = reference_of(board)

    def step(offset: int, player: int, points: int, ticks: int) -> dict[str, dict[str, Any]]:
        r = ref_result(offset, player, (points,), ticks)
        got = events_of(apply(board, [r]))
        assert by_id(got) == by_id(ref.apply(r))
        return {e["type"]: e for e in got}

    step(0, 1, 100, 5)
    step(1, 2, 60, 5)
    step(2, 3, 40, 5)
    # Player 3 ties player 1 (rank 1 shared) and passes player 2, now third.
    tied = step(3, 3, 100, 5)
    assert (tied["personal_best"]["rank"], tied["personal_best"]["previousRank"]) == (1, 3)
    passed = tied["overtaken"]
    assert (passed["playerId"], passed["rank"], passed["previousRank"]) == (2, 3, 2)
    # Player 4 enters below player 2, then passes them onto a value of their own.
    step(4, 4, 50, 6)
    alone = step(5, 4, 70, 6)
    assert (alone["overtaken"]["playerId"], alone["overtaken"]["rank"]) == (2, 4)
    assert (alone["personal_best"]["rank"], alone["personal_best"]["previousRank"]) == (3, 4)


@pytest.mark.parametrize("columns", [(), ("kills",)], ids=["plain", "tie-break"])
def test_a_tie_reached_from_below_passes_the_next_worse_player_only(
    board_redis, intact, columns
) -> None:
    # Player 12 reaches the exact value player 3 holds: on a tie-break board their members
    # sort "...12" before "...3", so the next member by position is the tied player 3.
    board = make_board(columns=columns, top_n=10)
    ref = reference_of(board)
    zeros = (0,) * len(columns)
    got: list[dict[str, Any]] = []
    for offset, player, points in [(0, 3, 100), (1, 5, 95), (2, 12, 90), (3, 12, 100)]:
        r = ref_result(offset, player, (points, *zeros), 7)
        got = events_of(apply(board, [r]))
        assert by_id(got) == by_id(ref.apply(r))
    (passed,) = [e for e in got if e["type"] == "overtaken"]
    assert (passed["playerId"], passed["rank"], passed["previousRank"]) == (5, 3, 2)
    assert passed["otherPlayerId"] == 12


def test_fields_of_an_event(board_redis, intact) -> None:
    board = make_board()
    r = ref_result(0, 42, (1518,), 10)
    (event,) = [e for e in events_of(apply(board, [r])) if e["type"] == "personal_best"]
    assert event == {
        "eventId": event["eventId"],
        "type": "personal_best",
        "seasonId": SEASON,
        "board": "main",
        "playerId": 42,
        "rank": 1,
        "previousRank": None,
        "points": 1518,
        "previousPoints": None,
        "matchId": r.match_id,
        "otherPlayerId": None,
        "at": "2026-10-01T01:00:00Z",
    }
    assert (
        event["eventId"]
        == match_result_cause(topic=TOPIC, board_id=BOARD, partition=0, offset=0)
        + ":personal_best:42"
    )


# --- every rule and order against the reference --------------------------------------------------

CASES = [
    (rule, order, columns)
    for rule in (ScoringRule.BEST, ScoringRule.LATEST, ScoringRule.CUMULATIVE)
    for order in (BoardOrder.DESC, BoardOrder.ASC)
    for columns in ((), ("desc", "asc"))
]


@pytest.mark.parametrize(("rule", "order", "columns"), CASES)
def test_every_rule_and_order_matches_the_reference(
    board_redis, intact, rule, order, columns
) -> None:
    board = make_board(rule=rule, order=order, columns=columns, top_n=4)
    ref = reference_of(board)
    rng = random.Random(f"{rule}{order}{columns}")
    results = [
        ref_result(
            offset,
            rng.randrange(1, 16),
            tuple(rng.randrange(0, 40) for _ in range(1 + len(columns))),
            # Every result its own tick: no two players ever hold equal values.
            10 + offset,
        )
        for offset in range(400)
    ]
    expected: list[dict[str, Any]] = []
    for r in results:
        expected += ref.apply(r)
    got: list[dict[str, Any]] = []
    start = 0
    while start < len(results):
        size = rng.randrange(1, 30)
        batch = results[start : start + size]
        got += events_of(apply(board, batch))
        if rng.random() < 0.3:
            # A redelivery: covered by the watermark, it yields no event with a new id (the
            # outbox entries still there come back, with the ids they had).
            again = events_of(apply(board, batch))
            assert set(by_id(again)) <= set(by_id(got))
        start += size
    expected_by_id = by_id(expected)
    got_by_id = {e["eventId"]: e for e in got}
    assert got_by_id == expected_by_id
    kinds = Counter(e["type"] for e in expected)
    assert {"personal_best", "rank_changed", "entered_top", "left_top"} <= set(kinds)
    # A sum on an asc board only gets worse after the first entry: nobody ever passes anyone.
    passes = not (rule == ScoringRule.CUMULATIVE and order == BoardOrder.ASC)
    assert ("overtaken" in kinds) == passes
    # Each result's events come in offset order.
    offsets = [int(e["matchId"].replace("-", ""), 16) - 1 for e in got]
    assert offsets == sorted(offsets)


def test_latest_worse_value_leaves_the_top_and_lets_the_next_one_in(board_redis, intact) -> None:
    board = make_board(rule=ScoringRule.LATEST, top_n=2)
    ref = reference_of(board)
    sequence = [(1, 50), (2, 40), (3, 30), (1, 10)]
    got: list[dict[str, Any]] = []
    expected: list[dict[str, Any]] = []
    for offset, (player, points) in enumerate(sequence):
        r = ref_result(offset, player, (points,), 10 + offset)
        got += events_of(apply(board, [r]))
        expected += ref.apply(r)
    assert by_id(got) == by_id(expected)
    last = {(e["type"], e["playerId"]) for e in got if e["matchId"] == str(uuid.UUID(int=4))}
    assert last == {
        ("personal_best", 1),
        ("rank_changed", 1),
        ("left_top", 1),
        ("entered_top", 3),
    }


# --- what emits nothing --------------------------------------------------------------------------


def test_a_board_with_events_off_writes_no_outbox(board_redis, intact) -> None:
    board = make_board(events=False)
    outcome = apply(board, [ref_result(0, 1, (10,), 5)])
    assert outcome.events == ()
    outbox = keys.rank_events_outbox(board_id=BOARD, topic=TOPIC, partition=0)
    assert board_redis.exists(outbox) == 0
    assert board_redis.zcard(keys.board(board_id=BOARD)) == 1


def test_a_board_redis_lost_emits_nothing_until_recovered(board_redis) -> None:
    board = make_board()
    outcome = apply(board, [ref_result(0, 1, (10,), 5)])
    assert outcome.events == ()
    assert board_redis.zcard(keys.board(board_id=BOARD)) == 1


def test_daily_boards_emit_nothing(board_redis, intact) -> None:
    board = make_board()
    # A result that counts on its day only (latest rule: not the player's latest season-long).
    result = counted(ref_result(0, 1, (10,), 5))._replace(season_long=False)
    outcome = board_results_apply(
        topic=TOPIC, results=[result], handled_offsets={0: 0}, boards={BOARD: board}
    )
    assert outcome.events == ()
    assert board_redis.zcard(keys.daily_board(board_id=BOARD, day=DAY)) == 1


# --- the outbox ----------------------------------------------------------------------------------


def test_a_covered_call_hands_back_what_its_outbox_still_holds(board_redis, intact) -> None:
    board = make_board()
    first = apply(board, [ref_result(0, 1, (10,), 5), ref_result(1, 2, (20,), 6)])
    assert len(first.events) == 1
    # The consumer crashed before publishing: the redelivery is covered by the watermark, and
    # the outbox still holds the events, which come back with their ids.
    again = apply(board, [ref_result(0, 1, (10,), 5), ref_result(1, 2, (20,), 6)])
    assert again.applied == 0
    assert again.events == first.events
    rank_events_outbox_trim(entries=again.events)
    outbox = keys.rank_events_outbox(board_id=BOARD, topic=TOPIC, partition=0)
    assert rank_events_outbox_read(outboxes=[outbox]) == []
    # Trimmed: a later redelivery finds nothing to publish.
    assert apply(board, [ref_result(1, 2, (20,), 6)]).events == ()


# A caller of another version: (the events column it spoils, how).
_SPOILED_EVENTS_COLUMNS = {
    "match ids one short": (6, lambda column: column.rsplit(" ", 1)[0]),
    "offsets one more": (5, lambda column: f"{column} 99"),
    "a time not a number": (7, lambda column: f"x{column[1:]}"),
    "two spaces between offsets": (5, lambda column: column.replace(" ", "  ")),
}


@pytest.mark.parametrize("columns", [(), ("desc", "asc")], ids=["plain", "tie-break"])
@pytest.mark.parametrize("spoiled", sorted(_SPOILED_EVENTS_COLUMNS))
def test_a_malformed_events_column_fails_loudly_and_moves_nothing(
    board_redis, intact, monkeypatch, spoiled, columns
) -> None:
    from redis.exceptions import ResponseError

    from leaderboard.services import apply as apply_module

    board = make_board(columns=columns)
    more = (1,) * len(columns)
    results = [
        counted(ref_result(0, 1, (10, *more), 5)),
        counted(ref_result(1, 2, (20, *more), 6)),
    ]
    real = apply_module._event_args
    index, spoil = _SPOILED_EVENTS_COLUMNS[spoiled]

    def malformed(**kwargs):
        args = real(**kwargs)
        args[index] = spoil(str(args[index]))
        return args

    monkeypatch.setattr(apply_module, "_event_args", malformed)
    with pytest.raises(ResponseError, match="events column"):
        board_results_apply(
            topic=TOPIC, results=results, handled_offsets={0: 1}, boards={BOARD: board}
        )
    assert board_redis.zcard(keys.board(board_id=BOARD)) == 0
    assert board_redis.hget(keys.ingest_applied_offsets(board_id=BOARD, topic=TOPIC), "0") is None


def test_an_outbox_entry_of_the_former_form_is_published_as_it_is() -> None:
    """Entries a consumer of the version before the compact form left in an outbox (one
    "<player id> <JSON>" line per event) are still published after an upgrade, byte for byte."""
    former = b'42 {"eventId":"a:personal_best:42"}\n7 {"eventId":"a:overtaken:7"}'
    assert outbox_messages(former) == [
        (b"42", b'{"eventId":"a:personal_best:42"}'),
        (b"7", b'{"eventId":"a:overtaken:7"}'),
    ]


def test_a_short_outbox_record_fails_loudly() -> None:
    with pytest.raises(ValueError, match="9 tokens after its header"):
        outbox_messages(b"E1 7 main - S 1:2:3:4 - 1796300000 42 1 null 10 null")
