"""Helpers for the tests of the local clusters (``devservices``; their nodes are killed and
restarted through ``devservices.faults``): the nodes' state as the nodes report it, and a poll
that tolerates a node being killed."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings
from kafka import KafkaAdminClient

REPO = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
# cluster-node-timeout is 2 s: a failover takes a few seconds; this bounds it generously.
REDIS_FAILOVER_SECONDS = 30.0
# broker.session.timeout.ms is 4 s; a restart needs the JVM and a catch-up of the replicas.
KAFKA_REJOIN_SECONDS = 90.0


def wait_for(what: str, condition: Callable[[], Any], timeout: float) -> Any:
    """Poll ``condition`` until it is truthy; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            result = condition()
        except (redis.RedisError, OSError) as exc:  # a node being killed or coming back
            result, last_error = None, exc
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout:.0f} s (last error: {last_error!r})")
        time.sleep(0.2)


# --------------------------------------------------------------------------------------------
# Redis Cluster
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RedisNode:
    node_id: str
    port: int
    flags: frozenset[str]
    master_id: str | None
    connected: bool
    slots: tuple[str, ...]

    @property
    def is_master(self) -> bool:
        return "master" in self.flags

    @property
    def failed(self) -> bool:
        return bool(self.flags & {"fail", "fail?"})


def redis_ports() -> list[int]:
    return [int(node.rpartition(":")[2]) for node in settings.LOCAL_REDIS_CLUSTER_NODES]


def node_client(port: int) -> redis.Redis:
    return redis.Redis(host=HOST, port=port, socket_timeout=3, socket_connect_timeout=2)


def topology(port: int) -> list[RedisNode]:
    """CLUSTER NODES as node ``port`` sees it."""
    raw = node_client(port).execute_command("CLUSTER", "NODES")
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    nodes = []
    for line in text.strip().splitlines():
        node_id, addr, flags, master, _ping, _pong, _epoch, link, *slots = line.split()
        nodes.append(
            RedisNode(
                node_id=node_id,
                port=int(addr.split("@")[0].rpartition(":")[2]),
                flags=frozenset(flags.split(",")),
                master_id=None if master == "-" else master,
                connected=link == "connected",
                slots=tuple(slots),
            )
        )
    return nodes


def cluster_info(port: int) -> dict[str, str]:
    raw = node_client(port).execute_command("CLUSTER", "INFO")
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    return dict(line.split(":", 1) for line in text.strip().splitlines() if ":" in line)


def state_ok(port: int) -> bool:
    return cluster_info(port).get("cluster_state") == "ok"


def role(port: int) -> list[Any]:
    return list(node_client(port).execute_command("ROLE"))


def healthy_layout(port: int) -> bool:
    """Three masters holding slots, each with one connected replica, nobody failed."""
    nodes = topology(port)
    masters = [n for n in nodes if n.is_master and n.slots]
    replicas = [n for n in nodes if not n.is_master]
    return (
        len(nodes) == 6
        and len(masters) == 3
        and len(replicas) == 3
        and all(n.connected and not n.failed for n in nodes)
        and sorted(r.master_id or "" for r in replicas) == sorted(m.node_id for m in masters)
    )


# --------------------------------------------------------------------------------------------
# Kafka, three brokers
# --------------------------------------------------------------------------------------------


def kafka_brokers() -> list[str]:
    return list(settings.LOCAL_KAFKA_CLUSTER_BROKERS)


def accepts_tcp(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError:
        return False
    return True


def unfenced_broker_ids(admin: KafkaAdminClient) -> set[int]:
    return {b["broker_id"] for b in admin.describe_cluster()["brokers"] if not b.get("is_fenced")}


def partitions_of(admin: KafkaAdminClient, topic: str) -> list[dict[str, Any]]:
    (described,) = admin.describe_topics([topic])
    return list(described["partitions"])
