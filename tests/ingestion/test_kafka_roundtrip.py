from __future__ import annotations

import json

from kafka import KafkaConsumer, KafkaProducer


def test_produce_and_consume_on_a_fresh_topic(kafka_topic_factory, kafka_bootstrap) -> None:
    topic = kafka_topic_factory(partitions=2)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    sent = [{"playerId": n, "points": n * 10} for n in range(20)]
    for message in sent:
        producer.send(
            topic, key=str(message["playerId"]).encode(), value=json.dumps(message).encode()
        )
    producer.flush()
    producer.close()

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=kafka_bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=15_000,
    )
    received = []
    for record in consumer:
        received.append(json.loads(record.value))
        if len(received) == len(sent):
            break
    consumer.close()
    assert sorted(received, key=lambda m: m["playerId"]) == sent
