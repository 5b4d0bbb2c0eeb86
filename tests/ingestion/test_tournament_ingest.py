"""Tournament boards at ingestion (contract 0.3): a result of a player who has not joined is a
dead letter ``not_joined``, one beyond the board's attempts ``attempts_exhausted``; each exactly
once under redelivery (the same batch again, a replay from an offset, another record carrying
the same result), while the counted results stay exactly what they were."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from ingestion.records import ConsumedRecord, DeadLetter
from ingestion.services import match_results_ingest
from leaderboard import keys
from leaderboard.models import Board, MatchResult, RefusedResult
from leaderboard.redis import get_board_redis
from leaderboard.services import ResultColumns, ResultRow, board_player_join, match_results_store
from tests.factories import board_factory
from tests.helpers import board_read, make_season

from .ingest_helpers import LetterSink, Result

pytestmark = pytest.mark.django_db(transaction=True)

TOPIC = "tournament-test"
START = datetime(2026, 3, 2, tzinfo=UTC)


def _season():
    return make_season(starts_at=START - timedelta(days=1), ends_at=START + timedelta(days=30))


def _result(season_id: int, board: str, player: int, points: int, minute: int) -> Result:
    return Result(
        uuid.uuid4(), player, season_id, points, START + timedelta(minutes=minute), board=board
    )


def _records(results: Sequence[Result], first_offset: int = 0) -> list[ConsumedRecord]:
    return [ConsumedRecord(0, first_offset + i, r.key(), r.value()) for i, r in enumerate(results)]


def _ingest(records: Sequence[ConsumedRecord], sink: LetterSink | None = None) -> LetterSink:
    sink = sink or LetterSink()
    match_results_ingest(topic=TOPIC, records=records, dead_letters=sink)
    return sink


def _codes(letters: Sequence[DeadLetter]) -> list[tuple[int, str]]:
    return sorted((letter.record.offset, letter.code) for letter in letters)


def _board_scores(board: Board) -> dict[int, int]:
    ref = board.codec
    raw = board_read(get_board_redis(), keys.board(board_id=board.id))
    return {player: ref.decode(score).points for player, score in raw.items()}


def test_not_joined_results_are_dead_letters_once_and_the_joined_count(board_redis) -> None:
    season = _season()
    cup = board_factory(season, "cup", join_required=True)
    for player in (1, 2):
        board_player_join(board_id=cup.id, player_id=player, now=START)
    results = [
        _result(season.id, "cup", 1, 10, 1),
        _result(season.id, "cup", 3, 99, 2),  # not joined
        _result(season.id, "cup", 2, 20, 3),
        _result(season.id, "main", 3, 5, 4),  # the main board takes everyone
        _result(season.id, "cup", 3, 98, 5),  # not joined
    ]
    records = _records(results)
    first = _ingest(records)
    assert _codes(first.letters) == [(1, "not_joined"), (4, "not_joined")]
    assert "player 3 has not joined board 'cup'" in first.letters[0].reason
    assert _board_scores(cup) == {1: 10, 2: 20}

    # The same batch again, then a replay from offset 0 in other batches: no second letter.
    assert _ingest(records).letters == []
    replay = LetterSink()
    for start in range(0, len(records), 2):
        _ingest(records[start : start + 2], replay)
    assert replay.letters == []
    # Another record carrying a refused result (a game server's retry): a duplicate.
    retry = ConsumedRecord(0, 50, results[1].key(), results[1].value())
    assert _ingest([retry]).letters == []
    # Joining later does not turn a refused result into a counted one (it was decided), but
    # the player's next result counts.
    board_player_join(board_id=cup.id, player_id=3, now=START)
    assert _ingest([ConsumedRecord(0, 51, results[1].key(), results[1].value())]).letters == []
    later = _result(season.id, "cup", 3, 30, 6)
    assert _ingest(_records([later], first_offset=52)).letters == []
    assert _board_scores(cup) == {1: 10, 2: 20, 3: 30}
    assert MatchResult.objects.filter(board=cup).count() == 3
    assert RefusedResult.objects.filter(board=cup).count() == 2
    assert not RefusedResult.objects.filter(dead_lettered_at__isnull=True).exists()
    # Staff open the board to everyone afterwards: what was refused stays refused, however
    # often its record comes again; new results count.
    Board.objects.filter(id=cup.id).update(join_required=False, max_attempts=None)
    assert _ingest([ConsumedRecord(0, 53, results[4].key(), results[4].value())]).letters == []
    assert MatchResult.objects.filter(board=cup).count() == 3
    assert _board_scores(cup) == {1: 10, 2: 20, 3: 30}


def test_results_beyond_the_attempts_are_dead_letters_once(board_redis) -> None:
    season = _season()
    tries = board_factory(season, "tries", max_attempts=2)
    one = [_result(season.id, "tries", 1, points, minute) for points, minute in [(5, 1), (9, 2)]]
    two = [_result(season.id, "tries", 1, points, minute) for points, minute in [(50, 3), (7, 4)]]
    other = _result(season.id, "tries", 2, 3, 5)
    records = _records([one[0], one[1], one[0], two[0], other, two[1]])
    letters = LetterSink()
    _ingest(records[:3], letters)  # two attempts, and a retry of the first (a duplicate)
    _ingest(records[3:], letters)
    assert _codes(letters.letters) == [(3, "attempts_exhausted"), (5, "attempts_exhausted")]
    assert "no attempt left on board 'tries'" in letters.letters[0].reason
    assert _board_scores(tries) == {1: 9, 2: 3}
    assert _ingest(records).letters == []  # a replay from offset 0, as one batch
    assert _board_scores(tries) == {1: 9, 2: 3}
    assert MatchResult.objects.filter(board=tries, player_id=1).count() == 2


def test_within_one_batch_the_first_records_take_the_attempts(board_redis) -> None:
    season = _season()
    cup = board_factory(season, "cup", join_required=True, max_attempts=3)
    board_player_join(board_id=cup.id, player_id=7, now=START)
    results = [_result(season.id, "cup", 7, 10 * i, i) for i in range(1, 6)]
    stranger = [_result(season.id, "cup", 8, 1, 9)]
    letters = _ingest(_records(results + stranger)).letters
    assert _codes(letters) == [
        (3, "attempts_exhausted"),
        (4, "attempts_exhausted"),
        (5, "not_joined"),
    ]
    assert _board_scores(cup) == {7: 30}


class _FailingSink:
    """A dead-letter topic that does not acknowledge (the process dies before it does)."""

    def publish(self, *, letters: Sequence[DeadLetter]) -> None:
        raise ConnectionError("broker unreachable")


def test_a_refusal_whose_letter_was_not_acknowledged_is_sent_by_the_redelivery(board_redis) -> None:
    season = _season()
    cup = board_factory(season, "cup", join_required=True)
    records = _records([_result(season.id, "cup", 4, 10, 1)])
    with pytest.raises(ConnectionError):
        match_results_ingest(topic=TOPIC, records=records, dead_letters=_FailingSink())
    refusal = RefusedResult.objects.get(board=cup)
    assert (refusal.code, refusal.dead_lettered_at) == ("not_joined", None)
    assert _codes(_ingest(records).letters) == [(0, "not_joined")]
    assert _ingest(records).letters == []
    assert not MatchResult.objects.filter(board=cup).exists()


def test_concurrent_batches_never_count_more_than_the_attempts() -> None:
    # Two consumers storing the same players' results side by side (a partition's two owners
    # during a rebalance): the board's tournament lock makes them decide in turn.
    season = _season()
    board = board_factory(season, "tries", max_attempts=3)
    threads, errors = 6, []
    barrier = threading.Barrier(threads)
    refused: Counter[str] = Counter()

    def store(worker: int) -> None:
        try:
            rows = [
                ResultRow(
                    uuid.uuid4(), player, season.id, board.id, i, START, worker, 10 * player + i
                )
                for player in range(1, 6)
                for i in range(2)
            ]
            barrier.wait()
            stored = match_results_store(results=ResultColumns.of(rows))
            refused.update(r.code for r in stored.refused.values())
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
    per_player = Counter(
        MatchResult.objects.filter(board=board).values_list("player_id", flat=True)
    )
    assert per_player == dict.fromkeys(range(1, 6), 3)
    assert refused == {"attempts_exhausted": 5 * (2 * threads - 3)}


def test_the_consumer_dead_letters_refusals_on_kafka_once_across_a_replay(
    topic_and_dlq, kafka_bootstrap, board_redis
) -> None:
    from ingestion.consumer import MatchResultConsumer

    from .ingest_helpers import consumer_options, publish_results
    from .topic_reader import topic_read, topic_size

    season = _season()
    cup = board_factory(season, "cup", join_required=True, max_attempts=2)
    for player in (1, 2):
        board_player_join(board_id=cup.id, player_id=player, now=START)
    results = [
        _result(season.id, "cup", player, 10 * player + i, i)
        for i in range(3)
        for player in (1, 2, 3)
    ]
    topic, dlq = topic_and_dlq("tournament", partitions=2)
    publish_results(topic, results)

    def consume() -> None:
        options = consumer_options(topic=topic, dead_letter_topic=dlq)
        totals = MatchResultConsumer(options).run(
            until=lambda t: t.records >= len(results), max_seconds=90
        )
        assert totals.records == len(results), totals

    consume()
    # Player 3 never joined (3 letters); players 1 and 2 have a third attempt each (2 letters).
    letters = topic_read(dlq, kafka_bootstrap, count=5)
    codes = Counter(dict(letter.headers)["dlq.code"].decode() for letter in letters)
    assert codes == {"not_joined": 3, "attempts_exhausted": 2}
    assert _board_scores(cup) == {1: 11, 2: 21}
    # A new consumer group replays the topic from offset 0: nothing more on the DLQ.
    consume()
    assert topic_size(dlq, kafka_bootstrap) == 5
    assert _board_scores(cup) == {1: 11, 2: 21}


def test_a_name_on_a_result_main_counts_is_kept_when_its_tournament_copy_is_refused(
    board_redis,
) -> None:
    """The same match sent for main and for a board the player has not joined, both with the
    player's name: the tournament copy is refused, main's counts, and so does the name (both
    copies share the player and achievedAt, which alone marked the name dropped)."""
    from players.models import PlayerProfile

    season = _season()
    board_factory(season, "cup", join_required=True)
    match = uuid.uuid4()
    at = START + timedelta(minutes=1)
    copies = [Result(match, 7, season.id, 40, at, board=slug) for slug in ("main", "cup")]
    values = [r.value().replace(b'"playerId"', b'"displayName": "Zed", "playerId"') for r in copies]
    records = [ConsumedRecord(0, i, b"7", value) for i, value in enumerate(values)]
    assert _codes(_ingest(records).letters) == [(1, "not_joined")]
    assert PlayerProfile.objects.get(player_id=7).display_name == "Zed"
