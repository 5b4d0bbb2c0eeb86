"""Fixtures of the cluster tests: each skips, with the reason, unless its cluster is up (the
cluster pass, ``make test-cluster``, fails a run in which any of them skipped)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from django.conf import settings
from kafka import KafkaAdminClient

from tests.infra.clusters import (
    HOST,
    accepts_tcp,
    healthy_layout,
    kafka_brokers,
    redis_ports,
    state_ok,
    unfenced_broker_ids,
    wait_for,
)


@pytest.fixture
def on_cluster() -> None:
    if settings.LB_REDIS_MODE != "cluster":
        pytest.skip("needs LB_REDIS_MODE=cluster (the boards on the local Redis Cluster)")


@pytest.fixture(scope="module")
def redis_cluster_up() -> list[int]:
    # Only in the cluster pass (make test-cluster), which starts the clusters from this
    # checkout: the kill/restart helpers act on this checkout's nodes only, and a cluster left
    # up by another checkout on a shared machine must not fail the single-node pass.
    if settings.LB_REDIS_MODE != "cluster":
        pytest.skip("needs LB_REDIS_MODE=cluster (make test-cluster starts the local cluster)")
    ports = redis_ports()
    try:
        if not all(state_ok(port) for port in ports):
            pytest.skip(f"the local Redis Cluster on {ports} is not in cluster_state:ok")
    except (redis.RedisError, OSError) as exc:
        pytest.skip(
            f"no local Redis Cluster on {HOST}:{ports[0]}-{ports[-1]} ({exc}); start it with "
            "LB_REDIS_MODE=cluster make services"
        )
    # A previous test's restarted node may still be syncing: wait for the full layout.
    wait_for("a healthy Redis Cluster layout", lambda: healthy_layout(ports[0]), 60)
    return ports


@pytest.fixture(scope="module")
def kafka_cluster_up() -> Iterator[KafkaAdminClient]:
    if settings.LB_KAFKA_BROKERS != 3:
        pytest.skip("needs LB_KAFKA_BROKERS=3 (make test-cluster starts the local brokers)")
    brokers = kafka_brokers()
    listening = [b for b in brokers if accepts_tcp(b)]
    if not listening:
        pytest.skip(
            f"no local Kafka cluster on {brokers} (nothing listens); start it with "
            "LB_KAFKA_BROKERS=3 make services"
        )
    try:
        admin = KafkaAdminClient(
            bootstrap_servers=brokers, client_id="tests-infra", request_timeout_ms=10000
        )
    except Exception as exc:  # any failure to connect means "not up"
        pytest.skip(
            f"no local Kafka cluster on {brokers} ({exc!r}); start it with "
            "LB_KAFKA_BROKERS=3 make services"
        )
    ids = unfenced_broker_ids(admin)
    if len(ids) < 3:
        admin.close()
        pytest.skip(f"the local Kafka cluster on {brokers} has {len(ids)} live brokers, not 3")
    yield admin
    admin.close()
