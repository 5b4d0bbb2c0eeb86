"""PostgreSQL and the broker unreachable mid-stream (TCP proxy cuts: the shared services keep
running for everyone else): the consumer waits, resumes, and every board ends exact."""

from __future__ import annotations

import re
import time
import uuid

import pytest
from django.conf import settings
from django.db import connection

from leaderboard.models import MatchResult
from tests.helpers import wait_until
from tests.ingestion.ingest_helpers import (
    TcpProxy,
    committed_offsets,
    end_offsets,
    publish_results,
)

from .fault_helpers import Outcome, consumer, make_stream, wait_exact

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

PG_OUTAGE_SECONDS = 30
KAFKA_OUTAGE_SECONDS = 10


def _proxy(target: int, listen_port: int = 0) -> TcpProxy:
    # The broker's fixed proxy port may be held for a moment by another checkout's run of
    # tests/ingestion/test_consumer_faults.py on the same services: wait for it, bounded.
    deadline = time.monotonic() + 60
    while True:
        try:
            return TcpProxy(target, listen_port=listen_port)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _hold(process, seconds: float, since: float) -> None:
    """Keep the dependency away for ``seconds`` from ``since``, failing early if the consumer
    dies meanwhile (it must wait, not exit)."""
    assert process.proc is not None
    wait_until(
        lambda: process.proc.poll() is not None or time.monotonic() - since >= seconds,
        timeout=seconds + 5,
        every=0.1,
    )
    assert process.proc.poll() is None, process.log_tail()


def test_postgresql_unreachable_30s_mid_stream(
    topic_and_dlq, board_redis, tmp_path, record
) -> None:
    stream = make_stream(count=6_000, players=800, seed=202)
    first, during, after = stream.chunks(3)
    topic, dlq = topic_and_dlq("pg", partitions=2)
    db = connection.settings_dict
    proxy = _proxy(int(db["PORT"] or 5432))
    group = f"test-pg-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "consumer.log"
    process = consumer(topic=topic, dlq=dlq, group=group, log=log)
    process.env["DATABASE_URL"] = (
        f"postgres://{db['USER']}:{db['PASSWORD']}@127.0.0.1:{proxy.port}/{db['NAME']}"
    )
    publish_results(topic, first)
    try:
        process.start()
        process.wait_for(lambda: MatchResult.objects.count() > 500, timeout=60)
        # Refused, as when PostgreSQL is stopped; the stream goes on meanwhile.
        cut_at = time.monotonic()
        proxy.cut(refuse=True)
        publish_results(topic, during)
        process.wait_for(lambda: "waiting for PostgreSQL" in log.read_text(), timeout=30)
        _hold(process, PG_OUTAGE_SECONDS, cut_at)
        proxy.restore()
        restored = time.monotonic()
        publish_results(topic, after)
        exactness = wait_exact(
            board_redis, stream, since=restored, timeout=60, context=process.log_tail
        )
        process.wait_for(lambda: committed_offsets(topic, group) == end_offsets(topic), timeout=30)
        process.stop()
    finally:
        process.kill_if_running()
        proxy.close()
    assert "PostgreSQL is back" in log.read_text()
    record(
        Outcome.exact(
            "PostgreSQL unreachable",
            f"PostgreSQL refused for {PG_OUTAGE_SECONDS} s mid-stream (proxy cut)",
            stream,
            exactness,
        )
    )


def test_broker_unreachable_and_back_mid_stream(
    topic_and_dlq, board_redis, tmp_path, record
) -> None:
    """The consumer reaches Kafka only through the broker's FAULTS listener, which advertises
    the proxy's address: cutting the proxy takes the broker away from this consumer alone."""
    stream = make_stream(count=6_000, players=800, seed=303)
    first, during, after = stream.chunks(3)
    topic, dlq = topic_and_dlq("broker", partitions=2)
    _host, proxy_port = settings.KAFKA_FAULTS_PROXY.rsplit(":", 1)
    listener_port = int(settings.KAFKA_FAULTS_LISTENER.rsplit(":", 1)[1])
    proxy = _proxy(listener_port, int(proxy_port))
    group = f"test-broker-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "consumer.log"
    process = consumer(
        topic=topic,
        dlq=dlq,
        group=group,
        log=log,
        KAFKA_BOOTSTRAP_SERVERS=settings.KAFKA_FAULTS_PROXY,
    )
    publish_results(topic, first)  # through the usual listener: producers keep the broker
    try:
        process.start()
        process.wait_for(lambda: MatchResult.objects.count() > 500, timeout=60)
        cut_at = time.monotonic()
        proxy.cut(refuse=True)
        publish_results(topic, during)
        process.wait_for(lambda: "waiting for Kafka" in log.read_text(), timeout=30)
        _hold(process, KAFKA_OUTAGE_SECONDS, cut_at)
        proxy.restore()
        restored = time.monotonic()
        publish_results(topic, after)
        exactness = wait_exact(
            board_redis, stream, since=restored, timeout=90, context=process.log_tail
        )
        process.wait_for(lambda: committed_offsets(topic, group) == end_offsets(topic), timeout=30)
        process.stop()
    finally:
        process.kill_if_running()
        proxy.close()
    # "Kafka is back", or "Kafka (offset commit) is back" when the cut caught a commit.
    assert re.search(r"Kafka( \(.*\))? is back", log.read_text())
    record(
        Outcome.exact(
            "broker unreachable",
            f"the broker refused for {KAFKA_OUTAGE_SECONDS} s mid-stream, then back (proxy cut)",
            stream,
            exactness,
        )
    )
