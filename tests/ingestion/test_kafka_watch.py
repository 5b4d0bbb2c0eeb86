"""When the consumer says Kafka is gone, and when it says it is back."""

from __future__ import annotations

import logging

import pytest

from ingestion.kafka_watch import KAFKA_LOST_GRACE, KafkaWatch


@pytest.fixture
def watch(caplog) -> KafkaWatch:
    caplog.set_level(logging.INFO, logger="ingestion.kafka_watch")
    return KafkaWatch(group_id="g", bootstrap_servers=["127.0.0.1:9092"])


def test_a_short_gap_says_nothing(watch, caplog) -> None:
    watch.observe(reachable=False, now=100.0)
    watch.observe(reachable=False, now=100.0 + KAFKA_LOST_GRACE - 0.1)
    watch.observe(reachable=True, now=100.0 + KAFKA_LOST_GRACE)

    assert not watch.lost
    assert caplog.text == ""


def test_a_gap_past_the_grace_is_reported_once_then_the_return(watch, caplog) -> None:
    watch.observe(reachable=False, now=100.0)
    watch.observe(reachable=False, now=100.0 + KAFKA_LOST_GRACE)
    watch.observe(reachable=False, now=110.0)

    assert watch.lost
    assert caplog.text.count("waiting for Kafka") == 1
    assert "group coordinator of g at 127.0.0.1:9092" in caplog.text

    watch.observe(reachable=True, now=112.5)

    assert not watch.lost
    assert "Kafka is back after 12.5s" in caplog.text
