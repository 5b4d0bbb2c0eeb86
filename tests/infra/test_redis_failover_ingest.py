"""A Redis master dies while the consumer streams results onto its boards: nothing is lost.

The dead master had acknowledged writes its replica never received (the test makes sure of it:
the replica is frozen with SIGSTOP and a large write queued ahead of the board's writes fills
the replication link, so the last batches exist only on the master when it is SIGKILLed). The
consumer commits those offsets, the replica is promoted without them, and Kafka will not
deliver them again; the consumer notices the new master, finds the boards whose watermark is
behind the results PostgreSQL holds below the committed offsets, and rebuilds them. Checked
against a reference computed here from what was produced: exact within 60 s of the kill,
nothing counted twice (the rule is cumulative, so a double count changes a sum).
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from redis.cluster import RedisCluster

from devservices import faults
from ingestion.consumer import IngestTotals, MatchResultConsumer
from leaderboard import keys
from leaderboard.models import RebuildRun, ScoringRule
from leaderboard.redis import get_board_redis
from seasons.models import SeasonStatus
from tests.helpers import board_read, expected_board, main_board_id, make_season
from tests.infra.clusters import (
    node_client,
    role,
    state_ok,
    topology,
)
from tests.ingestion.ingest_helpers import (
    Result,
    assert_boards_match,
    consumer_options,
    publish_results,
)

pytestmark = [pytest.mark.clusters, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

EXACT_WITHIN_SECONDS = 60.0
# Queued ahead of the board's writes on the replication link: more than the kernel's socket
# buffers hold, so the writes behind it are still in the master's memory when it dies.
LINK_FILLER_BYTES = 48 * 1024 * 1024


def _results(season, rng: random.Random, n: int) -> list[Result]:
    return [
        Result(
            uuid.uuid4(),
            rng.randint(1, 60),
            season.id,
            rng.randint(0, 500),
            season.starts_at + timedelta(hours=rng.randint(0, 47), seconds=rng.randint(0, 3599)),
        )
        for _ in range(n)
    ]


@pytest.mark.usefixtures("on_cluster", "redis_cluster_up")
def test_acknowledged_writes_a_dead_master_never_replicated_are_repaired(topic_and_dlq):
    season = make_season(rule=ScoringRule.CUMULATIVE, status=SeasonStatus.ACTIVE)
    board_id = main_board_id(season.id)
    board_key = keys.board(board_id=board_id)
    topic, dlq = topic_and_dlq("failover-ingest", partitions=3)
    rng = random.Random(10)
    produced: list[Result] = []
    options = consumer_options(
        topic=topic, dead_letter_topic=dlq, max_poll_records=50, failover_check_seconds=0.2
    )
    stop = threading.Event()
    totals: list[IngestTotals] = []

    def consume() -> None:
        try:
            totals.append(MatchResultConsumer(options, stop=stop).run(max_seconds=240))
        finally:
            connection.close()

    client = get_board_redis()
    assert isinstance(client, RedisCluster)
    master = int(client.get_node_from_key(board_key).port)
    master_id = next(n.node_id for n in topology(master) if n.port == master)
    replica = next(n.port for n in topology(master) if n.master_id == master_id)
    replica_pid = int(node_client(replica).info("server")["process_id"])
    filler_key = f"{board_key}:link-filler"

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    killed_at = None
    try:
        batch = _results(season, rng, 200)
        publish_results(topic, batch)
        produced += batch
        wait = time.monotonic() + 60
        while len(board_read(client, board_key)) < 20:
            assert time.monotonic() < wait, "the consumer applied nothing"
            time.sleep(0.1)

        # Freeze the replica, clog the link ahead of the next board writes, let them be acked.
        os.kill(replica_pid, signal.SIGSTOP)
        try:
            node_client(master).set(filler_key, b"x" * LINK_FILLER_BYTES)
            watermark = keys.ingest_applied_offsets(board_id=board_id, topic=topic)
            before = client.hgetall(watermark)
            batch = _results(season, rng, 300)
            publish_results(topic, batch)
            produced += batch
            wait = time.monotonic() + 30
            while (
                client.hgetall(keys.ingest_applied_offsets(board_id=board_id, topic=topic))
                == before
            ):
                assert time.monotonic() < wait, "the consumer applied nothing more"
                time.sleep(0.05)
            time.sleep(1.0)  # a few more acknowledged batches (and their commits)
            faults.redis_cluster_kill(master)
            killed_at = time.monotonic()
        finally:
            os.kill(replica_pid, signal.SIGCONT)

        # Results keep coming while the cluster fails over.
        for _ in range(5):
            batch = _results(season, rng, 100)
            publish_results(topic, batch)
            produced += batch
            time.sleep(0.5)

        def exact() -> bool:
            try:
                return board_read(client, board_key) == expected_board(season, produced)
            except Exception:  # the slot has no master yet, or the client is catching up
                return False

        while not exact():
            assert time.monotonic() - killed_at < EXACT_WITHIN_SECONDS, (
                f"board not exact within {EXACT_WITHIN_SECONDS:.0f} s of the kill; "
                f"replica {replica} role {role(replica)[0]!r}"
            )
            time.sleep(0.2)
        exact_after = time.monotonic() - killed_at
        assert_boards_match(client, season, produced)  # the daily boards too
        # The loss was real and the repair did it, not a lucky replication.
        assert RebuildRun.objects.filter(board_id=board_id, reason__contains="failover").exists(), (
            f"exact after {exact_after:.1f} s but no repair ran"
        )
    finally:
        stop.set()
        consumer.join(timeout=60)
        if killed_at is not None:
            faults.redis_cluster_start(master)
            deadline = time.monotonic() + 60
            while not (state_ok(replica) and role(master)[0] == b"slave"):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.5)
        client.delete(filler_key)
    assert totals
    assert totals[0].records == len(produced)
