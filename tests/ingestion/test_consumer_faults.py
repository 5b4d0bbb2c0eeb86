"""Dependencies going away under a running consumer: it waits, logs, commits nothing, resumes."""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from urllib.parse import urlparse

import pytest
from django.db import connection

from ingestion.consumer import MatchResultConsumer
from leaderboard.models import MatchResult, ScoringRule
from tests.helpers import make_season, mark_intact, wait_until

from .ingest_helpers import (
    ConsumerProcess,
    Result,
    TcpProxy,
    assert_boards_match,
    committed_offsets,
    consumer_options,
    end_offsets,
    publish_results,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def single_node_redis(settings) -> None:
    # The outage is a TCP proxy in front of the standalone Redis; on the cluster, the failure
    # that matters (a master dying) is tested in tests/infra/test_redis_failover_ingest.py.
    if settings.LB_REDIS_MODE == "cluster":
        pytest.skip("cuts the standalone Redis through a proxy; the cluster has its own tests")


@pytest.fixture
def single_node_kafka(settings) -> None:
    if settings.LB_KAFKA_BROKERS != 1:
        pytest.skip("cuts the single broker's faults listener; the cluster has its own tests")


def _results(season, count: int, first_player: int) -> list[Result]:
    return [
        Result(
            uuid.uuid4(),
            first_player + n % 50,
            season.id,
            n % 97,
            season.starts_at + timedelta(hours=n),
        )
        for n in range(count)
    ]


def _committed_total(topic: str, group: str) -> int:
    return sum(o or 0 for o in committed_offsets(topic, group).values())


# How soon after a dependency's return a consumer must be applying results again.
RESUME_WITHIN_SECONDS = 5.0


def _outage(seconds: float) -> None:
    """Keep a dependency away this long: the outage's length, not a wait for anything."""
    time.sleep(seconds)


def _boards_through_proxy(settings) -> TcpProxy:
    """Point the boards' Redis at a proxy in front of it (same database), to cut it at will."""
    boards = dict(settings.CACHES["boards"])
    location = urlparse(boards["LOCATION"])
    proxy = TcpProxy(location.port or 6379)
    boards["LOCATION"] = f"redis://127.0.0.1:{proxy.port}{location.path}"
    settings.CACHES = {**settings.CACHES, "boards": boards}
    return proxy


def _runner(consumer: MatchResultConsumer, failures: list[BaseException]) -> Callable[[], None]:
    """The consumer's run for a thread: what it raises is kept in ``failures``."""

    def run() -> None:
        try:
            consumer.run()
        except BaseException as exc:
            failures.append(exc)
        finally:
            connection.close()

    return run


def _faults_proxy(settings) -> TcpProxy:
    """A proxy in front of the broker's FAULTS listener, on the port that listener advertises."""
    _proxy_host, proxy_port = settings.KAFKA_FAULTS_PROXY.rsplit(":", 1)
    listener_port = int(settings.KAFKA_FAULTS_LISTENER.rsplit(":", 1)[1])
    try:
        socket.create_connection(("127.0.0.1", listener_port), timeout=2).close()
    except OSError:
        pytest.fail(
            f"Kafka has no FAULTS listener on port {listener_port}: it was started with an older "
            "configuration; restart it (make services-stop && make services)"
        )
    return TcpProxy(listener_port, listen_port=int(proxy_port))


@pytest.mark.usefixtures("single_node_redis")
def test_redis_outage_waits_and_resumes_without_loss_or_double_count(
    topic_and_dlq, settings, board_redis, caplog
) -> None:
    caplog.set_level(logging.INFO, logger="ingestion")
    season = make_season(rule=ScoringRule.CUMULATIVE)
    topic, dlq = topic_and_dlq("redis-down", partitions=2)
    proxy = _boards_through_proxy(settings)
    options = consumer_options(topic=topic, dead_letter_topic=dlq)
    consumer = MatchResultConsumer(options)
    failures: list[BaseException] = []
    run = _runner(consumer, failures)

    before = _results(season, 300, first_player=1)
    during = _results(season, 300, first_player=1000)
    publish_results(topic, before)
    thread = threading.Thread(target=run)
    thread.start()

    def state() -> str:
        # What a timed-out wait saw, so that a failure in CI reads without a rerun.
        log = "\n".join(caplog.text.splitlines()[-40:])
        return (
            f"committed {committed_offsets(topic, options.group_id)}, end {end_offsets(topic)}, "
            f"applied {consumer.totals.applied}, consumer alive {thread.is_alive()}, "
            f"failures {failures!r}\nlast log lines:\n{log}"
        )

    try:
        wait_until(
            lambda: _committed_total(topic, options.group_id) == len(before),
            timeout=60,
            context=state,
        )
        proxy.cut()
        publish_results(topic, during)
        wait_until(lambda: "waiting for Redis" in caplog.text, timeout=30, context=state)
        wait_until(lambda: MatchResult.objects.count() > len(before), timeout=30, context=state)
        # Stored in PostgreSQL but not on the boards: nothing of it may be committed.
        assert _committed_total(topic, options.group_id) == len(before)

        proxy.restore()
        wait_until(
            lambda: committed_offsets(topic, options.group_id) == end_offsets(topic),
            timeout=60,
            context=state,
        )
    finally:
        consumer.request_stop()
        thread.join(timeout=60)
        proxy.close()
    assert not failures
    assert "Redis is back" in caplog.text
    assert consumer.totals.applied == len(before) + len(during)
    assert_boards_match(board_redis, season, before + during)


def test_postgresql_outage_waits_and_resumes_without_loss_or_double_count(
    topic_and_dlq, board_redis, tmp_path
) -> None:
    season = make_season(rule=ScoringRule.CUMULATIVE)
    topic, dlq = topic_and_dlq("pg-down", partitions=2)
    db = connection.settings_dict
    proxy = TcpProxy(int(db["PORT"] or 5432))
    group = f"test-pg-down-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "consumer.log"
    process = ConsumerProcess(topic=topic, dlq=dlq, group=group, log=log)
    process.env["DATABASE_URL"] = (
        f"postgres://{db['USER']}:{db['PASSWORD']}@127.0.0.1:{proxy.port}/{db['NAME']}"
    )
    before = _results(season, 300, first_player=1)
    during = _results(season, 300, first_player=1000)
    publish_results(topic, before)
    try:
        process.start()
        process.wait_for(lambda: _committed_total(topic, group) == len(before), timeout=60)
        proxy.cut()
        publish_results(topic, during)
        process.wait_for(lambda: "waiting for PostgreSQL" in log.read_text(), timeout=30)
        assert _committed_total(topic, group) == len(before)

        proxy.restore()
        process.drain_then_stop(topic=topic, group=group, timeout=60)
    finally:
        process.kill_if_running()
        proxy.close()
    assert "PostgreSQL is back" in log.read_text()
    assert MatchResult.objects.count() == len(before) + len(during)
    assert_boards_match(board_redis, season, before + during)


@pytest.mark.usefixtures("single_node_redis")
def test_a_stop_while_redis_is_down_leaves_the_batch_uncommitted_for_redelivery(
    topic_and_dlq, settings, board_redis, caplog
) -> None:
    caplog.set_level(logging.INFO, logger="ingestion")
    season = make_season(rule=ScoringRule.CUMULATIVE)
    topic, dlq = topic_and_dlq("stop-down", partitions=2)
    proxy = TcpProxy(urlparse(settings.CACHES["boards"]["LOCATION"]).port or 6379)
    direct = dict(settings.CACHES["boards"])
    boards = {**direct, "LOCATION": f"redis://127.0.0.1:{proxy.port}/0"}
    settings.CACHES = {**settings.CACHES, "boards": boards}
    results = _results(season, 200, first_player=1)
    publish_results(topic, results)
    options = consumer_options(topic=topic, dead_letter_topic=dlq)
    # Redis goes away and comes back with its data: the board stays intact (a board Redis lost
    # is tests/faults/test_redis_loss.py's).
    mark_intact(season, topic=topic)
    consumer = MatchResultConsumer(options)
    proxy.cut()

    def run() -> None:
        try:
            consumer.run()
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    try:
        wait_until(lambda: "waiting for Redis" in caplog.text, timeout=60)
        consumer.request_stop()
        thread.join(timeout=30)
        assert not thread.is_alive()
    finally:
        proxy.close()
    assert "will be delivered again" in caplog.text
    assert MatchResult.objects.count() > 0  # stored, never applied
    assert _committed_total(topic, options.group_id) == 0

    # Redis is back: the same group gets the batch again and applies it once.
    settings.CACHES = {**settings.CACHES, "boards": direct}
    totals = MatchResultConsumer(options).run(
        until=lambda t: t.records >= len(results), max_seconds=90
    )
    assert totals.applied == len(results)
    assert_boards_match(board_redis, season, results)


@pytest.mark.usefixtures("single_node_kafka")
def test_kafka_outage_waits_and_resumes_without_loss_or_double_count(
    topic_and_dlq, settings, board_redis, tmp_path
) -> None:
    """The consumer reaches Kafka only through a proxy (the broker's FAULTS listener
    advertises the proxy's address), so cutting the proxy takes Kafka away from it alone."""
    season = make_season(rule=ScoringRule.CUMULATIVE)
    topic, dlq = topic_and_dlq("kafka-down", partitions=2)
    proxy = _faults_proxy(settings)
    group = f"test-kafka-down-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "consumer.log"
    process = ConsumerProcess(topic=topic, dlq=dlq, group=group, log=log)
    process.env["KAFKA_BOOTSTRAP_SERVERS"] = settings.KAFKA_FAULTS_PROXY
    before = _results(season, 300, first_player=1)
    during = _results(season, 300, first_player=1000)
    after = _results(season, 300, first_player=2000)
    # Published through the broker's usual listener: only the consumer loses Kafka.
    publish_results(topic, before)
    try:
        process.start()
        process.wait_for(lambda: _committed_total(topic, group) == len(before), timeout=60)
        # Refused, as when the broker is down (its clients then back off between attempts).
        proxy.cut(refuse=True)
        publish_results(topic, during)
        process.wait_for(lambda: "waiting for Kafka" in log.read_text(), timeout=60)
        # Its stats stop claiming a lag they cannot know (high-water marks are Kafka's).
        process.wait_for(
            lambda: "lag unknown" in log.read_text().split("waiting for Kafka", 1)[1], timeout=30
        )
        # Cut off from Kafka it cannot fetch what was published meanwhile: nothing of it is
        # stored, applied or committed.
        assert MatchResult.objects.count() == len(before)
        assert _committed_total(topic, group) == len(before)
        assert process.proc is not None
        assert process.proc.poll() is None

        proxy.restore()
        publish_results(topic, after)
        process.drain_then_stop(topic=topic, group=group, timeout=120)
    finally:
        process.kill_if_running()
        proxy.close()
    assert "Kafka is back" in log.read_text()
    assert MatchResult.objects.count() == len(before) + len(during) + len(after)
    assert_boards_match(board_redis, season, before + during + after)


@pytest.mark.usefixtures("single_node_kafka")
def test_after_a_long_kafka_outage_the_consumer_resumes_within_seconds_of_its_return(
    topic_and_dlq, settings, board_redis, tmp_path
) -> None:
    """A broker away for 35 s: kafka-python doubles its reconnect backoff from 50 ms on every
    refused attempt, and with its default cap (30 s) the next attempt after the return came
    16 s later, give or take its jitter (a consumer sat at 0 results/s after a broker restart).
    With the consumer's cap (INGEST_KAFKA_RECONNECT_BACKOFF_MAX_MS) it is back within 5 s."""
    season = make_season(rule=ScoringRule.CUMULATIVE)
    topic, dlq = topic_and_dlq("kafka-back", partitions=2)
    proxy = _faults_proxy(settings)
    group = f"test-kafka-back-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "consumer.log"
    process = ConsumerProcess(topic=topic, dlq=dlq, group=group, log=log)
    process.env["KAFKA_BOOTSTRAP_SERVERS"] = settings.KAFKA_FAULTS_PROXY
    # The settings' own backoff caps, as a deployment runs them.
    del process.env["INGEST_BACKOFF_MAX_SECONDS"]
    before = _results(season, 300, first_player=1)
    during = _results(season, 300, first_player=1000)
    publish_results(topic, before)
    try:
        process.start()
        process.wait_for(lambda: _committed_total(topic, group) == len(before), timeout=60)
        proxy.cut(refuse=True)  # as a stopped broker: every connection attempt refused
        publish_results(topic, during)
        process.wait_for(lambda: "waiting for Kafka" in log.read_text(), timeout=30)
        _outage(35)
        proxy.restore()
        process.wait_for(
            lambda: _committed_total(topic, group) > len(before), timeout=RESUME_WITHIN_SECONDS
        )
        process.drain_then_stop(topic=topic, group=group, timeout=60)
    finally:
        process.kill_if_running()
        proxy.close()
    assert MatchResult.objects.count() == len(before) + len(during)
    assert_boards_match(board_redis, season, before + during)


@pytest.mark.usefixtures("single_node_redis")
def test_after_a_long_redis_outage_the_consumer_resumes_within_seconds_of_its_return(
    topic_and_dlq, settings, board_redis
) -> None:
    """The consumer's own backoff (INGEST_BACKOFF_MAX_SECONDS) doubles from 0.1 s up to its
    cap while a dependency stays away: 15 s into an outage, a 10 s cap meant a wait that ended
    about 8 s after the return. The default cap keeps the resume within 5 s."""
    season = make_season(rule=ScoringRule.CUMULATIVE)
    topic, dlq = topic_and_dlq("redis-back", partitions=2)
    proxy = _boards_through_proxy(settings)
    options = consumer_options(topic=topic, dead_letter_topic=dlq, backoff_max_seconds=None)
    assert options.backoff_max_seconds == settings.INGEST_BACKOFF_MAX_SECONDS
    consumer = MatchResultConsumer(options)
    failures: list[BaseException] = []
    run = _runner(consumer, failures)

    before = _results(season, 300, first_player=1)
    during = _results(season, 300, first_player=1000)
    publish_results(topic, before)
    thread = threading.Thread(target=run)
    thread.start()
    try:
        wait_until(lambda: _committed_total(topic, options.group_id) == len(before), timeout=60)
        proxy.cut(refuse=True)
        publish_results(topic, during)
        wait_until(lambda: MatchResult.objects.count() > len(before), timeout=30)
        _outage(15)
        assert _committed_total(topic, options.group_id) == len(before)
        proxy.restore()
        wait_until(
            lambda: _committed_total(topic, options.group_id) > len(before),
            timeout=RESUME_WITHIN_SECONDS,
        )
        wait_until(
            lambda: committed_offsets(topic, options.group_id) == end_offsets(topic), timeout=60
        )
    finally:
        consumer.request_stop()
        thread.join(timeout=60)
        proxy.close()
    assert not failures
    assert consumer.totals.applied == len(before) + len(during)
    assert_boards_match(board_redis, season, before + during)
