"""The local clusters of ``devservices`` survive the death of one node.

Run against the real processes: a Redis Cluster of three masters and three replicas
(``LB_REDIS_MODE=cluster``) and a three-node KRaft Kafka (``LB_KAFKA_BROKERS=3``), killed with
SIGKILL through ``devservices.faults``. Each half is skipped, with the reason, when its cluster
does not answer (in ``make test-cluster`` such a skip fails the run): start them with
``LB_REDIS_MODE=cluster LB_KAFKA_BROKERS=3 make services``.
The nodes are killed and restarted from this checkout's state folder (``LB_LOCAL_DIR``), so the
clusters must have been started from it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from redis.cluster import ClusterNode, RedisCluster

from devservices import faults
from tests.infra.clusters import (
    HOST,
    KAFKA_REJOIN_SECONDS,
    REDIS_FAILOVER_SECONDS,
    REPO,
    cluster_info,
    healthy_layout,
    kafka_brokers,
    node_client,
    partitions_of,
    role,
    state_ok,
    topology,
    unfenced_broker_ids,
    wait_for,
)
from tests.ingestion.topic_reader import topic_read

pytestmark = pytest.mark.clusters


def test_redis_cluster_has_three_masters_and_three_replicas(redis_cluster_up: list[int]) -> None:
    for port in redis_cluster_up:
        info = cluster_info(port)
        assert info["cluster_state"] == "ok", port
        assert info["cluster_known_nodes"] == "6", port
        assert info["cluster_slots_assigned"] == "16384", port
    nodes = topology(redis_cluster_up[0])
    masters = {n.node_id: n for n in nodes if n.is_master}
    replicas = [n for n in nodes if not n.is_master]
    assert len(masters) == 3
    assert all(m.slots for m in masters.values())
    assert len(replicas) == 3
    # One replica per master.
    assert sorted(r.master_id or "" for r in replicas) == sorted(masters)


def test_redis_master_killed_replica_promoted_then_old_master_rejoins_as_replica(
    redis_cluster_up: list[int],
) -> None:
    key = f"test-infra:{{failover-{uuid.uuid4().hex[:8]}}}"
    value = uuid.uuid4().hex
    seeds = [ClusterNode(HOST, port) for port in redis_cluster_up]
    client = RedisCluster(startup_nodes=seeds, socket_timeout=3, socket_connect_timeout=2)
    owner = client.get_node_from_key(key)
    assert owner is not None
    victim = int(owner.port)
    nodes = topology(victim)
    victim_id = next(n.node_id for n in nodes if n.port == victim)
    replica = next(n.port for n in nodes if n.master_id == victim_id)
    survivor = next(p for p in redis_cluster_up if p not in {victim, replica})

    # Written on the master and acknowledged by its replica before the kill (WAIT on the same
    # connection: a pipeline without MULTI is one connection).
    pipe = node_client(victim).pipeline(transaction=False)
    pipe.set(key, value)
    pipe.execute_command("WAIT", 1, 5000)
    _, acked_by = pipe.execute()
    assert acked_by >= 1

    killed_at = time.monotonic()
    try:
        out = faults.redis_cluster_kill(victim)
        assert f"killed Redis cluster node {victim}" in out

        wait_for(
            f"replica {replica} promoted and cluster_state:ok after master {victim} died",
            lambda: role(replica)[0] == b"master" and state_ok(replica) and state_ok(survivor),
            REDIS_FAILOVER_SECONDS,
        )
        failover_seconds = time.monotonic() - killed_at
        assert failover_seconds < REDIS_FAILOVER_SECONDS

        # A fresh client that only knows the surviving nodes finds the key on the new master.
        fresh = RedisCluster(
            startup_nodes=[ClusterNode(HOST, p) for p in redis_cluster_up if p != victim],
            socket_timeout=3,
            socket_connect_timeout=2,
        )
        assert fresh.get(key) == value.encode()
        assert int(fresh.get_node_from_key(key).port) == replica
        fresh.close()
    finally:
        out = faults.redis_cluster_start(victim)
    assert f"started Redis cluster node {victim}" in out or "already running" in out

    def rejoined_as_replica() -> bool:
        r = role(victim)
        # ROLE of a replica: [b"slave", master host, master port, b"connected", offset]
        return r[0] == b"slave" and int(r[2]) == replica and r[3] == b"connected"

    wait_for(f"node {victim} back as a replica of {replica}", rejoined_as_replica, 60)
    wait_for("a healthy Redis Cluster layout", lambda: healthy_layout(survivor), 60)
    assert node_client(replica).get(key) == value.encode()
    client.close()
    node_client(replica).delete(key)


# --------------------------------------------------------------------------------------------
# Kafka, three brokers
# --------------------------------------------------------------------------------------------


def test_kafka_broker_killed_and_restarted_nothing_lost(
    kafka_cluster_up: KafkaAdminClient,
) -> None:
    admin = kafka_cluster_up
    brokers = kafka_brokers()
    topic = f"test-infra-{uuid.uuid4().hex[:12]}"
    admin.create_topics([NewTopic(topic, 3, 3, topic_configs={"min.insync.replicas": "2"})])
    try:
        _produce_and_consume_through_a_broker_death(admin, brokers, topic)
    finally:
        admin.delete_topics([topic])


def _produce_and_consume_through_a_broker_death(
    admin: KafkaAdminClient, brokers: list[str], topic: str
) -> None:
    def fully_replicated() -> bool:
        # Right after create_topics the metadata may list no partition yet: all([]) is no answer.
        partitions = partitions_of(admin, topic)
        return len(partitions) == 3 and all(len(p["isr_nodes"]) == 3 for p in partitions)

    wait_for("every partition with three in-sync replicas", fully_replicated, 30)
    victim = next(p["leader_id"] for p in partitions_of(admin, topic) if p["partition_index"] == 0)

    acked: set[int] = set()
    failed: list[BaseException] = []
    consumed: list[int] = []
    stop_producing = threading.Event()
    stop_consuming = threading.Event()

    producer = KafkaProducer(
        bootstrap_servers=brokers,
        acks="all",
        enable_idempotence=True,
        retries=2**31 - 1,
        request_timeout_ms=10000,
        delivery_timeout_ms=120000,
        linger_ms=5,
    )

    def produce() -> None:
        n = 0
        while not stop_producing.is_set():
            value = n

            def on_ok(_meta: Any, value: int = value) -> None:
                acked.add(value)

            producer.send(topic, key=str(n).encode(), value=str(n).encode()).add_callback(
                on_ok
            ).add_errback(failed.append)
            n += 1
            stop_producing.wait(0.002)  # pacing: ~hundreds of results a second
        producer.flush(timeout=120)

    def consume() -> None:
        # Partitions assigned, no group: this is the cluster's survival (fetches follow the
        # partitions' new leaders), not kafka-python's group coordinator failover, which a
        # victim that also coordinates the group can stall past the wait below. The product's
        # consumer group through a broker death: test_kafka_broker_death_ingest.py.
        consumer = KafkaConsumer(
            bootstrap_servers=brokers,
            group_id=None,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        consumer.assign([TopicPartition(topic, p) for p in range(3)])
        try:
            while not stop_consuming.is_set():
                for records in consumer.poll(timeout_ms=200).values():
                    consumed.extend(int(r.value) for r in records)
        finally:
            consumer.close()

    # Daemons: a client stuck past the waits below fails this test rather than hang the run.
    threads = [
        threading.Thread(target=produce, daemon=True),
        threading.Thread(target=consume, daemon=True),
    ]
    for t in threads:
        t.start()
    try:
        wait_for("200 acknowledged writes before the kill", lambda: len(acked) >= 200, 60)
        out = faults.kafka_broker_kill(victim)
        assert f"killed Kafka node {victim}" in out
        acked_at_kill, consumed_at_kill = len(acked), len(consumed)

        # Producing and consuming go on with two brokers (RF 3, min.insync.replicas 2).
        wait_for(
            "500 more acknowledged writes with a broker dead",
            lambda: len(acked) >= acked_at_kill + 500,
            KAFKA_REJOIN_SECONDS,
        )
        wait_for(
            "consumption going on with a broker dead",
            lambda: len(consumed) >= consumed_at_kill + 500,
            KAFKA_REJOIN_SECONDS,
        )
        assert not failed, failed[:3]
        assert victim not in unfenced_broker_ids(admin)

        out = faults.kafka_broker_start(victim)
        assert f"started Kafka node {victim}" in out
        wait_for(
            f"broker {victim} back in the ISR of every partition",
            lambda: all(victim in p["isr_nodes"] for p in partitions_of(admin, topic)),
            KAFKA_REJOIN_SECONDS,
        )
        acked_at_restart = len(acked)
        wait_for(
            "200 more acknowledged writes after the restart",
            lambda: len(acked) >= acked_at_restart + 200,
            60,
        )
    finally:
        stop_producing.set()
        threads[0].join(timeout=150)
        if victim not in _safe_unfenced(admin):
            faults.kafka_broker_start(victim)

    producer.close(timeout=30)
    assert not failed, failed[:3]
    expected = set(acked)
    wait_for(
        "every acknowledged write consumed",
        lambda: expected <= set(consumed),
        KAFKA_REJOIN_SECONDS,
    )
    stop_consuming.set()
    threads[1].join(timeout=30)

    # The log itself, read from the start by a fresh consumer: every acknowledged write once.
    in_log = [int(record.value) for record in topic_read(topic, brokers)]
    counts = Counter(in_log)
    assert set(counts) == expected
    assert max(counts.values()) == 1


def _safe_unfenced(admin: KafkaAdminClient) -> set[int]:
    try:
        return unfenced_broker_ids(admin)
    except Exception:  # best effort, in a finally
        return set()


def test_a_second_checkout_reuses_the_running_clusters_and_its_stop_leaves_them(
    kafka_cluster_up: KafkaAdminClient, tmp_path: Path
) -> None:
    """Another clone's ``make run`` on the same machine (its own state folder) must use the
    clusters this checkout started, not fail on their ports, and its stop must leave them."""
    env = {
        **os.environ,
        "LB_LOCAL_DIR": str(tmp_path / "other-checkout"),
        "LB_REDIS_MODE": "cluster",
        "LB_KAFKA_BROKERS": "3",
    }

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "devservices", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
            env=env,
        )

    started = run("start")
    assert started.returncode == 0, started.stderr
    said = started.stdout + started.stderr
    assert "Kafka cluster: 3 brokers already answering" in said
    stopped = run("stop")
    assert stopped.returncode == 0, stopped.stderr
    assert len(unfenced_broker_ids(kafka_cluster_up)) == 3
