"""The kafka-python internals ``ingestion.kafka_adapter`` reads, checked on a real consumer.

The consumer's "waiting for Kafka" / "Kafka is back" lines and its unknown lag during an outage
rest on two private attributes of kafka-python. When a kafka-python upgrade fails these tests,
the message names the attribute: fix ``ingestion/kafka_adapter.py`` for the new release, then
bump ``VERIFIED_KAFKA_PYTHON`` with the pin in pyproject.toml.
"""

from __future__ import annotations

import tomllib
import uuid
from pathlib import Path
from typing import Any

import kafka
import pytest
from kafka import KafkaConsumer

from ingestion.kafka_adapter import (
    VERIFIED_KAFKA_PYTHON,
    group_coordinator_connected,
    group_coordinator_id,
    node_connected,
)
from tests.helpers import wait_until

ADAPTER = "ingestion/kafka_adapter.py"


def _broken(what: str) -> str:
    return (
        f"kafka-python {kafka.__version__}: {what}. {ADAPTER} reads it (verified on "
        f"kafka-python {VERIFIED_KAFKA_PYTHON}); adapt it to this release"
    )


def _attribute(obj: Any, name: str, expected: type | tuple[type, ...]) -> Any:
    where = f"{type(obj).__name__}.{name}"
    if not hasattr(obj, name):
        pytest.fail(_broken(f"{where} is gone"))
    value = getattr(obj, name)
    if not isinstance(value, expected):
        pytest.fail(_broken(f"{where} is a {type(value).__name__}, not {expected}"))
    return value


def _method(obj: Any, name: str) -> Any:
    where = f"{type(obj).__name__}.{name}()"
    method = getattr(obj, name, None)
    if not callable(method):
        pytest.fail(_broken(f"{where} is gone"))
    return method


def _returns_bool(where: str, value: Any) -> bool:
    if not isinstance(value, bool):
        pytest.fail(_broken(f"{where} returned a {type(value).__name__}, not a bool"))
    return value


@pytest.fixture
def new_consumer(kafka_bootstrap):
    consumers: list[KafkaConsumer] = []

    def make() -> KafkaConsumer:
        consumer = KafkaConsumer(
            bootstrap_servers=kafka_bootstrap,
            group_id=f"test-adapter-{uuid.uuid4().hex[:12]}",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        consumers.append(consumer)
        return consumer

    yield make
    for consumer in consumers:
        consumer.close(autocommit=False)


@pytest.fixture
def joined_consumer(new_consumer, kafka_topic_factory) -> KafkaConsumer:
    """A consumer that has joined its group: it has a coordinator and heartbeats through it."""
    consumer = new_consumer()
    topic = kafka_topic_factory("adapter")
    # As the consumer does (ingestion/consumer.py): join once the topic's partitions are in this
    # client's metadata. A member that joins before (a topic created a moment ago, a cluster's
    # brokers not all aware of it yet) is assigned nothing until its next metadata refresh,
    # minutes later.
    wait_until(lambda: bool(consumer.partitions_for_topic(topic)), timeout=30)
    consumer.subscribe([topic])

    def joined() -> bool:
        consumer.poll(timeout_ms=200)
        return bool(consumer.assignment())

    wait_until(joined, timeout=60)
    return consumer


def test_the_verified_version_is_the_pinned_and_installed_one() -> None:
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    [pin] = [d for d in pyproject["project"]["dependencies"] if d.startswith("kafka-python")]
    assert pin == f"kafka-python=={VERIFIED_KAFKA_PYTHON}", (
        f"pyproject.toml pins {pin}, {ADAPTER} was verified on {VERIFIED_KAFKA_PYTHON}: run "
        "this file on the new pin, adapt the adapter, then bump VERIFIED_KAFKA_PYTHON"
    )
    assert kafka.__version__ == VERIFIED_KAFKA_PYTHON, _broken("installed, not the pinned one")


def test_the_private_attributes_exist_with_the_expected_types(joined_consumer) -> None:
    coordinator = _attribute(joined_consumer, "_coordinator", object)
    try:
        from kafka.coordinator.consumer import ConsumerCoordinator
    except ImportError as exc:
        pytest.fail(_broken(f"kafka.coordinator.consumer.ConsumerCoordinator is gone ({exc})"))
    _attribute(joined_consumer, "_coordinator", ConsumerCoordinator)
    unknown = _method(coordinator, "coordinator_unknown")()
    assert _returns_bool("ConsumerCoordinator.coordinator_unknown()", unknown) is False
    coordinator_id = _attribute(coordinator, "coordinator_id", (int, str))

    client = _attribute(joined_consumer, "_client", object)
    connected = _method(client, "connected")(coordinator_id)
    assert _returns_bool(f"{type(client).__name__}.connected()", connected) is True


def test_the_adapter_sees_a_joined_consumer_connected_to_its_coordinator(joined_consumer) -> None:
    node_id = group_coordinator_id(joined_consumer)

    assert node_id is not None
    assert node_id == joined_consumer._coordinator.coordinator_id
    assert node_connected(joined_consumer, node_id) is True
    assert node_connected(joined_consumer, "no-such-node") is False
    assert group_coordinator_connected(joined_consumer) is True


def test_a_consumer_that_never_joined_has_no_coordinator(new_consumer) -> None:
    consumer = new_consumer()

    assert group_coordinator_id(consumer) is None
    assert group_coordinator_connected(consumer) is False
