"""The kafka-python internals the consumer reads, in one place.

kafka-python reconnects by itself inside ``poll()`` and says nothing through its public API:
an unreachable broker just looks like an empty poll. Only its group coordinator and its network
client tell the two apart, and both are private (``KafkaConsumer._coordinator``,
``KafkaConsumer._client``). This module is the only code that touches them; the version is
pinned in pyproject.toml, and ``tests/ingestion/test_kafka_adapter.py`` fails, naming the
attribute, when an upgrade moves or changes one of them.
"""

from __future__ import annotations

from kafka import KafkaConsumer

# The kafka-python release these attributes were read from (the pin in pyproject.toml).
VERIFIED_KAFKA_PYTHON = "3.0.12"

# kafka-python names a coordinator with a synthesized string ("coordinator-<broker id>"), a
# broker with its integer id.
NodeId = int | str


def group_coordinator_id(consumer: KafkaConsumer) -> NodeId | None:
    """The node id of the consumer group's coordinator, or None while it is unknown.

    Asking also makes kafka-python forget a coordinator whose connection failed and is backing
    off (``coordinator_unknown()``); short of that, it keeps naming a lost coordinator until it
    happens to look again, so a known id alone does not mean Kafka is there.
    """
    coordinator = consumer._coordinator
    if coordinator.coordinator_unknown():
        return None
    node_id: NodeId | None = coordinator.coordinator_id
    return node_id


def node_connected(consumer: KafkaConsumer, node_id: NodeId) -> bool:
    """Whether the consumer holds an open connection to ``node_id`` right now."""
    return bool(consumer._client.connected(node_id))


def group_coordinator_connected(consumer: KafkaConsumer) -> bool:
    """Whether the consumer is connected to its group coordinator.

    The consumer heartbeats through that connection, so it stays open while Kafka is there.
    """
    node_id = group_coordinator_id(consumer)
    return node_id is not None and node_connected(consumer, node_id)
