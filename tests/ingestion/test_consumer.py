"""The consumer against real Kafka, PostgreSQL and Redis, run in-process until a condition holds."""

from __future__ import annotations

import contextlib
import json
import random
import threading
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings
from django.db import connection
from kafka import KafkaProducer

from ingestion.consumer import IngestTotals, MatchResultConsumer
from ingestion.dead_letters import CUT_VALUE_BYTES, REASON_MAX_BYTES
from leaderboard import keys
from leaderboard.models import MatchResult, PlayerBan, ScoringRule
from seasons.models import SeasonStatus
from tests.helpers import as_board, main_board_id, make_season, wait_until

from .ingest_helpers import (
    Result,
    assert_boards_match,
    committed_offsets,
    consumer_options,
    end_offsets,
    publish,
    publish_results,
    unique_results,
)
from .topic_reader import topic_read

pytestmark = pytest.mark.django_db(transaction=True)


def _consume(options, *, records: int, max_seconds: float = 90) -> IngestTotals:
    totals = MatchResultConsumer(options).run(
        until=lambda t: t.records >= records, max_seconds=max_seconds
    )
    assert totals.records == records, totals
    return totals


def _stored() -> set[tuple[uuid.UUID, int, int]]:
    return set(MatchResult.objects.values_list("match_id", "player_id", "points"))


@pytest.fixture
def topics(topic_and_dlq):
    return topic_and_dlq("ingest", partitions=3)


def _scenario(season) -> tuple[list[Result], list[Result]]:
    """(messages in publish order, incl. duplicates; the distinct results among them)."""
    start = season.starts_at
    t = lambda days, seconds=0: start + timedelta(days=days, seconds=seconds)  # noqa: E731
    r = lambda player, points, when: Result(uuid.uuid4(), player, season.id, points, when)  # noqa: E731
    first = r(1, 500, t(1, 10))
    equal_later = r(1, 500, t(1, 20))  # same points reached later: must not move player 1
    lower_later = r(1, 300, t(1, 30))
    late_arrival = r(2, 900, t(2, 5))
    early_but_delivered_after = r(2, 900, t(1, 5))  # out of order: the earlier one ranks
    twice_same_message = r(3, 700, t(3))
    same_result_two_messages = r(4, 400, t(4))
    other_day = r(4, 650, t(5, 3600))
    many = [r(10 + n % 25, (n * 37) % 1000, t(n % 6, n)) for n in range(200)]
    messages = [
        first,
        equal_later,
        lower_later,
        late_arrival,
        early_but_delivered_after,
        twice_same_message,
        twice_same_message,
        same_result_two_messages,
        Result(
            same_result_two_messages.match_id,
            4,
            season.id,
            same_result_two_messages.points,
            same_result_two_messages.achieved_at,
        ),
        other_day,
        *many,
    ]
    return messages, unique_results(messages)


@pytest.mark.parametrize("rule", [ScoringRule.BEST, ScoringRule.CUMULATIVE])
def test_board_equals_the_reference_despite_duplicates_and_disorder(
    rule, topics, board_redis
) -> None:
    season = make_season(rule=rule, status=SeasonStatus.ACTIVE)
    topic, dlq = topics
    messages, distinct = _scenario(season)
    publish_results(topic, messages)
    options = consumer_options(topic=topic, dead_letter_topic=dlq)

    totals = _consume(options, records=len(messages))

    assert totals.applied == len(distinct)
    assert totals.duplicates == len(messages) - len(distinct)
    assert totals.dead_letters == 0
    assert_boards_match(board_redis, season, distinct)
    assert _stored() == {(r.match_id, r.player_id, r.points) for r in distinct}
    committed, ends = committed_offsets(topic, options.group_id), end_offsets(topic)
    if committed != ends:
        # kafka-python's member can stay out of its group for minutes after a rebalance refused
        # its commit (seen on the local cluster; the close-out drain test meets it too): a
        # restart takes over, as a supervisor's would; all it reads again is a duplicate, and
        # it commits.
        again = _consume(
            options,
            records=sum(end - (committed.get(p) or 0) for p, end in ends.items()),
        )
        assert (again.applied, again.dead_letters) == (0, 0)
        assert_boards_match(board_redis, season, distinct)
    assert committed_offsets(topic, options.group_id) == ends


def test_best_rule_equal_score_later_never_moves_a_player(topics, board_redis) -> None:
    season = make_season(rule=ScoringRule.BEST)
    topic, dlq = topics
    start = season.starts_at
    early = Result(uuid.uuid4(), 7, season.id, 100, start + timedelta(hours=1))
    later = Result(uuid.uuid4(), 7, season.id, 100, start + timedelta(hours=2))
    publish_results(topic, [early])
    _consume(consumer_options(topic=topic, dead_letter_topic=dlq), records=1)
    before = board_redis.zscore(keys.board(board_id=main_board_id(season.id)), "7")

    publish_results(topic, [later])
    _consume(consumer_options(topic=topic, dead_letter_topic=dlq), records=2)

    assert board_redis.zscore(keys.board(board_id=main_board_id(season.id)), "7") == before
    assert as_board(season).codec.decode(int(before)).elapsed_ticks == 3600


def test_replaying_the_whole_topic_changes_nothing_under_the_cumulative_rule(
    topics, board_redis
) -> None:
    season = make_season(rule=ScoringRule.CUMULATIVE)
    topic, dlq = topics
    rng = random.Random(7)
    results = [
        Result(
            uuid.uuid4(),
            rng.randint(1, 40),
            season.id,
            rng.randint(0, 1000),
            season.starts_at + timedelta(seconds=rng.randint(0, 10 * 86400)),
        )
        for _ in range(600)
    ]
    publish_results(topic, results)
    _consume(consumer_options(topic=topic, dead_letter_topic=dlq), records=len(results))
    assert_boards_match(board_redis, season, results)

    # A new consumer group starts from offset 0 and sees every message again.
    replay = _consume(consumer_options(topic=topic, dead_letter_topic=dlq), records=len(results))

    assert (replay.applied, replay.duplicates) == (0, len(results))
    assert_boards_match(board_redis, season, results)
    assert MatchResult.objects.count() == len(results)


def test_every_kind_of_bad_message_is_dead_lettered_with_its_reason(topics, board_redis) -> None:
    season = make_season(rule=ScoringRule.BEST)
    closing = make_season(status=SeasonStatus.CLOSING)
    closed = make_season(status=SeasonStatus.CLOSED)
    topic, dlq = topics
    when = season.starts_at + timedelta(days=1)
    good = Result(uuid.uuid4(), 1, season.id, 10, when)

    def bad(**overrides: object) -> bytes:
        return json.dumps({**good.message(), "matchId": str(uuid.uuid4()), **overrides}).encode()

    missing = {k: v for k, v in good.message().items() if k != "points"}
    bad_messages: list[tuple[bytes | None, str]] = [
        (b"\xff\xfe\x00", "not_utf8"),
        (b"{not json", "not_json"),
        (b"[1, 2, 3]", "not_object"),
        (json.dumps(missing).encode(), "missing_field"),
        (bad(playerId="1"), "wrong_type"),
        (bad(points=1.5), "wrong_type"),
        (bad(matchId="nope"), "invalid_value"),
        (bad(playerId=0), "invalid_value"),
        (bad(points=-5), "invalid_value"),
        (bad(points=as_board(season).codec.max_points + 1), "points_too_large"),
        (bad(seasonId=999_999), "unknown_season"),
        (bad(achievedAt="2026-10-02T00:00:00"), "invalid_value"),
        (bad(achievedAt=(season.starts_at - timedelta(seconds=1)).isoformat()), "outside_season"),
        (bad(achievedAt=(season.ends_at + timedelta(seconds=1)).isoformat()), "outside_season"),
        # A closing season still takes results inside its window, not one after its end.
        (
            bad(
                seasonId=closing.id, achievedAt=(closing.ends_at + timedelta(seconds=1)).isoformat()
            ),
            "outside_season",
        ),
        (bad(seasonId=closed.id, achievedAt=closed.starts_at.isoformat()), "season_closed"),
        # A lone surrogate is valid JSON but not text: the reason that names it must still
        # encode (as \ud800), or the consumer could not write its dead letter.
        (bad(tiebreakers={"\ud800": "x"}), "invalid_tiebreakers"),
    ]
    goods = [
        Result(uuid.uuid4(), n, season.id, n * 10, when) for n in range(1, len(bad_messages) + 2)
    ]
    stream: list[tuple[bytes | None, bytes | None]] = []
    for n, (value, _) in enumerate(bad_messages):
        stream += [(goods[n].key(), goods[n].value()), (f"bad-{n}".encode(), value)]
    stream.append((goods[-1].key(), goods[-1].value()))
    publish(topic, stream)

    totals = _consume(consumer_options(topic=topic, dead_letter_topic=dlq), records=len(stream))

    assert totals.dead_letters == len(bad_messages)
    assert totals.applied == len(goods)
    assert_boards_match(board_redis, season, goods)
    letters = {r.key: r for r in topic_read(dlq, count=len(bad_messages))}
    assert len(letters) == len(bad_messages)
    for n, (value, code) in enumerate(bad_messages):
        letter = letters[f"bad-{n}".encode()]
        headers = {k: v.decode() for k, v in letter.headers}
        assert letter.value == value, n
        assert headers["dlq.code"] == code, (n, headers["dlq.reason"])
        assert headers["dlq.reason"]
        assert headers["dlq.source.topic"] == topic
        assert int(headers["dlq.source.offset"]) >= 0
    surrogate = {k: v.decode() for k, v in letters[f"bad-{len(bad_messages) - 1}".encode()].headers}
    assert surrogate["dlq.reason"] == "tiebreakers.\\ud800 must be an integer, got a string"


def _publish_compressed(topic: str, records: list[tuple[bytes, bytes]], *, codec: str) -> None:
    """``records`` (key, value) to partition 0 in record batches compressed with ``codec``, as
    a game server's producer may send them (past the 1 MB a request when uncompressed)."""
    producer = KafkaProducer(
        bootstrap_servers=settings.KAFKA_BOOTSTRAP_SERVERS,
        compression_type=codec,
        max_request_size=4_000_000,
        acks="all",
    )
    for key, value in records:
        producer.send(topic, key=key, value=value, partition=0)
    producer.flush()
    producer.close()


def test_a_dead_letter_too_large_to_publish_whole_is_published_cut(topics, board_redis) -> None:
    # 2 MB of spaces reach the topic gzipped (about 2 KB on the wire): whole, with its headers,
    # the dead letter is past the producer's and broker's 1 MB. Refused, it was retried forever
    # and held the partition.
    season = make_season(rule=ScoringRule.BEST)
    topic, dlq = topics
    when = season.starts_at + timedelta(days=1)
    before, after = (Result(uuid.uuid4(), n, season.id, 10 * n, when) for n in (1, 2))
    huge = b" " * 2_000_000 + b"x"
    _publish_compressed(
        topic,
        [(before.key(), before.value()), (before.key(), huge), (after.key(), after.value())],
        codec="gzip",
    )

    totals = _consume(consumer_options(topic=topic, dead_letter_topic=dlq), records=3)

    assert (totals.dead_letters, totals.applied) == (1, 2)
    assert_boards_match(board_redis, season, [before, after])
    [letter] = topic_read(dlq, count=1)
    headers = {k: v.decode() for k, v in letter.headers}
    assert headers["dlq.code"] == "not_json"
    assert (headers["dlq.cut"], headers["dlq.value.bytes"]) == ("true", str(len(huge)))
    assert letter.value == huge[:CUT_VALUE_BYTES]
    assert letter.key == before.key()


def test_a_reason_quoting_a_huge_value_is_cut_and_the_letter_published(topics, board_redis) -> None:
    # A 2 MB matchId, gzipped on the wire: the reason quoted it whole, a header the cut letter
    # kept, so even the cut letter was past the broker's 1 MB and the consumer retried it for
    # good, holding both topics.
    season = make_season(rule=ScoringRule.BEST)
    topic, dlq = topics
    when = season.starts_at + timedelta(days=1)
    before, after = (Result(uuid.uuid4(), n, season.id, 10 * n, when) for n in (1, 2))
    bad = {**before.message(), "matchId": "x" * 2_000_000}
    values = (before.value(), json.dumps(bad).encode(), after.value())
    _publish_compressed(topic, [(before.key(), value) for value in values], codec="gzip")

    totals = _consume(consumer_options(topic=topic, dead_letter_topic=dlq), records=3)

    assert (totals.dead_letters, totals.applied) == (1, 2)
    assert_boards_match(board_redis, season, [before, after])
    [letter] = topic_read(dlq, count=1)
    headers = {k: v.decode() for k, v in letter.headers}
    assert headers["dlq.code"] == "invalid_value"
    assert headers["dlq.reason"].startswith("matchId must be a UUID, got 'xxxx")
    assert len(headers["dlq.reason"]) <= REASON_MAX_BYTES


@pytest.mark.parametrize("codec", ["lz4", "snappy", "zstd"])
def test_record_batches_compressed_by_game_servers_are_read(topics, board_redis, codec) -> None:
    # kafka-python decodes gzip alone unless the codecs' libraries are installed: poll() raised
    # UnsupportedCodecError, the process ended, and its restart met the same batch.
    season = make_season(rule=ScoringRule.BEST)
    topic, dlq = topics
    when = season.starts_at + timedelta(days=1)
    results = [Result(uuid.uuid4(), n, season.id, 10 * n, when) for n in (1, 2, 3)]
    _publish_compressed(topic, [(r.key(), r.value()) for r in results], codec=codec)

    totals = _consume(consumer_options(topic=topic, dead_letter_topic=dlq), records=3)

    assert (totals.dead_letters, totals.applied) == (0, 3)
    assert_boards_match(board_redis, season, results)


def test_the_dead_letter_topic_is_made_with_the_settings_before_any_letter(
    topics, board_redis
) -> None:
    # Left to the broker's auto-creation at the first letter: on a cluster that creates no
    # topic on its own, that letter (and the consumer behind it) waited for good.
    from kafka import KafkaAdminClient

    season = make_season(rule=ScoringRule.BEST)
    topic, _ = topics
    dlq = f"{topic}-letters"
    publish_results(topic, [Result(uuid.uuid4(), 1, season.id, 10, season.starts_at)])
    admin = KafkaAdminClient(bootstrap_servers=settings.KAFKA_BOOTSTRAP_SERVERS)
    try:
        totals = _consume(consumer_options(topic=topic, dead_letter_topic=dlq), records=1)
        assert (totals.applied, totals.dead_letters) == (1, 0)
        [described] = admin.describe_topics([dlq])
        assert len(described["partitions"]) == settings.KAFKA_TOPIC_PARTITIONS
    finally:
        with contextlib.suppress(Exception):
            admin.delete_topics([dlq])
        admin.close()


def test_daily_boards_expire_and_consumer_stats_are_published(
    topics, board_redis, settings, client
) -> None:
    settings.LEADERBOARD_DAILY_TTL_DAYS = 3
    season = make_season(rule=ScoringRule.BEST)
    topic, dlq = topics
    result = Result(uuid.uuid4(), 5, season.id, 10, season.starts_at + timedelta(days=2))
    publish_results(topic, [result])
    options = consumer_options(topic=topic, dead_letter_topic=dlq)

    _consume(options, records=1)

    daily = keys.daily_board(board_id=main_board_id(season.id), day=result.achieved_at.date())
    # The day is long past: the board lives TTL days from this late write.
    expected = datetime.now(UTC) + timedelta(days=3)
    assert abs(board_redis.expiretime(daily) - expected.timestamp()) < 60
    assert board_redis.ttl(keys.board(board_id=main_board_id(season.id))) == -1
    stats = board_redis.hgetall(keys.ingest_consumer_stats(consumer_id=options.consumer_id))
    assert stats[b"applied"] == b"1"
    assert stats[b"topic"] == topic.encode()
    body = client.get("/metrics.json").json()["ingestion"]
    [mine] = [c for c in body["consumers"] if c["consumerId"] == options.consumer_id]
    assert (mine["applied"], mine["deadLetters"], mine["lag"]) == (1, 0, 0)


def test_results_of_a_banned_player_are_stored_but_not_counted(topics, board_redis) -> None:
    season = make_season(rule=ScoringRule.BEST)
    PlayerBan.objects.create(season=season, player_id=66, reason="cheating")
    topic, dlq = topics
    when = season.starts_at + timedelta(days=1)
    banned = [Result(uuid.uuid4(), 66, season.id, 900 + n, when) for n in range(3)]
    fair = [Result(uuid.uuid4(), 67 + n, season.id, 100, when) for n in range(3)]
    publish_results(topic, banned + fair)

    totals = _consume(consumer_options(topic=topic, dead_letter_topic=dlq), records=6)

    assert (totals.applied, totals.not_counted) == (3, 3)
    assert MatchResult.objects.count() == 6
    assert_boards_match(board_redis, season, fair)


def test_consumers_joining_one_group_mid_ingest_count_everything_once(
    topic_and_dlq, board_redis
) -> None:
    season = make_season(rule=ScoringRule.CUMULATIVE)
    topic, dlq = topic_and_dlq("group", partitions=4)
    rng = random.Random(5)
    results = [
        Result(
            uuid.uuid4(),
            rng.randint(1, 300),
            season.id,
            rng.randint(0, 100),
            season.starts_at + timedelta(seconds=rng.randint(0, 3 * 86400)),
        )
        for _ in range(6000)
    ]
    publish_results(topic, results)
    options = consumer_options(topic=topic, dead_letter_topic=dlq, max_poll_records=200)
    consumers: list[MatchResultConsumer] = []
    threads: list[threading.Thread] = []

    def start() -> None:
        consumer = MatchResultConsumer(replace(options, consumer_id=f"c{len(consumers)}"))

        def run() -> None:
            try:
                consumer.run()
            finally:
                connection.close()

        consumers.append(consumer)
        threads.append(threading.Thread(target=run))
        threads[-1].start()

    start()
    wait_until(lambda: MatchResult.objects.count() > 0, timeout=60)
    # Each newcomer makes the group rebalance while batches are in flight.
    start()
    start()
    try:
        wait_until(
            lambda: committed_offsets(topic, options.group_id) == end_offsets(topic), timeout=90
        )
    finally:
        for consumer in consumers:
            consumer.request_stop()
        for thread in threads:
            thread.join(timeout=60)
    assert sum(c.totals.applied for c in consumers) == len(results)
    assert_boards_match(board_redis, season, results)
