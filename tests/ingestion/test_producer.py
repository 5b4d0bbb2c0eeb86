from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from ingestion.producer import MatchResultProducer
from ingestion.schema import MatchResultMessage, message_decode

from .topic_reader import topic_read


def test_round_trip_keys_by_player_and_writes_the_contract_json(
    kafka_topic_factory, kafka_bootstrap
) -> None:
    topic = kafka_topic_factory(partitions=3)
    match_id = uuid.UUID("8d2b6f0e-3f4a-4c61-9a57-2b1f0c7d9e11")
    sent = [
        MatchResultMessage(
            match_id=match_id,
            player_id=player_id,
            season_id=12,
            points=1518 + player_id,
            achieved_at=datetime(2026, 10, 12, 10, 15, tzinfo=UTC),
        )
        for player_id in (42, 7, 1_000_000_007)
    ]
    with MatchResultProducer(bootstrap_servers=kafka_bootstrap, topic=topic) as producer:
        assert producer.send_many(sent) == 3

    records = topic_read(topic, kafka_bootstrap, count=3)
    by_key = {record.key: record for record in records}
    assert set(by_key) == {b"42", b"7", b"1000000007"}
    assert json.loads(by_key[b"42"].value) == {
        "matchId": "8d2b6f0e-3f4a-4c61-9a57-2b1f0c7d9e11",
        "playerId": 42,
        "seasonId": 12,
        "points": 1560,
        "achievedAt": "2026-10-12T10:15:00Z",
    }
    # What the producer writes is exactly what the consumer decodes.
    assert {message_decode(r.value) for r in records} == set(sent)


def test_one_players_results_share_a_partition(kafka_topic_factory, kafka_bootstrap) -> None:
    topic = kafka_topic_factory(partitions=4)
    start = datetime(2026, 10, 12, tzinfo=UTC)
    sent = [
        MatchResultMessage(uuid.uuid4(), player, 12, n, start + timedelta(seconds=n))
        for n in range(10)
        for player in (3, 4, 5)
    ]
    with MatchResultProducer(
        bootstrap_servers=kafka_bootstrap, topic=topic, compression_type="gzip"
    ) as producer:
        producer.send_many(sent)
    records = topic_read(topic, kafka_bootstrap, count=len(sent))
    partitions: dict[bytes, set[int]] = {}
    for record in records:
        partitions.setdefault(record.key, set()).add(record.partition)
    assert all(len(p) == 1 for p in partitions.values())
    # And in order within it.
    for key in partitions:
        points = [json.loads(r.value)["points"] for r in records if r.key == key]
        assert points == sorted(points)


def test_offsets_are_kept_in_the_json(kafka_topic_factory, kafka_bootstrap) -> None:
    topic = kafka_topic_factory()
    plus_two = timezone(timedelta(hours=2))
    result = MatchResultMessage(
        uuid.uuid4(), 9, 12, 5, datetime(2026, 10, 12, 12, 0, 0, 250_000, tzinfo=plus_two)
    )
    with MatchResultProducer(bootstrap_servers=kafka_bootstrap, topic=topic) as producer:
        producer.send_many([result])
    (record,) = topic_read(topic, kafka_bootstrap, count=1)
    achieved = json.loads(record.value)["achievedAt"]
    assert datetime.fromisoformat(achieved) == result.achieved_at
    assert achieved.endswith(("Z", "+02:00"))


def test_a_naive_time_is_refused_before_sending() -> None:
    from ingestion.producer import match_result_value

    naive = MatchResultMessage(uuid.uuid4(), 9, 12, 5, datetime(2026, 10, 12, 12, 0))
    with pytest.raises(ValueError, match="UTC offset"):
        match_result_value(naive)
