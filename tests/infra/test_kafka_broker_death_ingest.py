"""A Kafka broker dies and comes back while results stream in through both doors: exact boards.

Results arrive the two ways game servers send them, at once: published straight to the topic
(a producer with ``acks=all``) and posted in batches to ``POST /api/match-results`` (the HTTP
door, which publishes them in turn). One of the three brokers, the leader of a partition, is
SIGKILLed mid-stream and restarted later. The door may answer 503 with ``Retry-After`` while
the partition's leadership moves; the test's client then waits and posts the same batch again,
as game servers do, so a batch can reach the topic twice (once from the request Kafka did not
acknowledge in time, once from the retry). The consumer, a real process, must go on through it
all; the boards and PostgreSQL must end equal to a reference computed here from what was
acknowledged (published and acked, or answered 202): nothing lost, nothing counted twice (the
rule is cumulative, so a double count changes a sum).
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from kafka import KafkaAdminClient, KafkaProducer
from rest_framework.test import APIClient

from devservices import faults
from ingestion.services import game_server_token_create
from leaderboard import keys
from leaderboard.models import MatchResult, ScoringRule
from leaderboard.redis import get_board_redis
from seasons.models import Season, SeasonStatus
from tests.helpers import board_read, expected_board, main_board_id, make_season, wait_until
from tests.infra.clusters import (
    KAFKA_REJOIN_SECONDS,
    partitions_of,
    unfenced_broker_ids,
    wait_for,
)
from tests.ingestion.ingest_helpers import (
    ConsumerProcess,
    Result,
    assert_boards_match,
    unique_results,
)

pytestmark = [pytest.mark.clusters, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

URL = "/api/match-results"
DOOR_BATCH = 20
# From the last result acknowledged to the boards exact: the consumer drains what is queued.
EXACT_WITHIN_SECONDS = 90.0


@pytest.fixture
def on_kafka_cluster() -> None:
    if list(settings.KAFKA_BOOTSTRAP_SERVERS) != list(settings.LOCAL_KAFKA_CLUSTER_BROKERS):
        pytest.skip("needs LB_KAFKA_BROKERS=3 (the topics on the local three-broker Kafka)")


def _result(season: Season, rng: random.Random) -> Result:
    return Result(
        uuid.uuid4(),
        rng.randint(1, 80),
        season.id,
        rng.randint(0, 500),
        season.starts_at + timedelta(hours=rng.randint(0, 47), seconds=rng.randint(0, 3599)),
    )


class Streams:
    """Two feeds running in threads until ``stop``: the topic producer and, given a game-server
    token, the HTTP door.

    ``acked`` holds what Kafka acknowledged to the producer and every batch the door answered
    202 (after however many 503s); ``errors`` whatever neither may meet (a failed delivery, an
    unexpected status, an exception), for the test to fail on.
    """

    def __init__(self, season: Season, topic: str, raw_token: str | None = None) -> None:
        self.season, self.topic = season, topic
        self.lock = threading.Lock()
        self.via_kafka: list[Result] = []
        self.via_door: list[Result] = []
        self.door_posts = 0
        self.door_503 = 0
        self.errors: list[Any] = []
        self.stop = threading.Event()
        self.producer = KafkaProducer(
            bootstrap_servers=settings.KAFKA_BOOTSTRAP_SERVERS,
            acks="all",
            enable_idempotence=True,
            retries=2**31 - 1,
            request_timeout_ms=10_000,
            delivery_timeout_ms=120_000,
            linger_ms=5,
        )
        self.client = APIClient()
        self.client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_token}")
        self.threads = [threading.Thread(target=self._produce, name="produce", daemon=True)]
        if raw_token is not None:
            self.threads.append(threading.Thread(target=self._post, name="door", daemon=True))

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def acked(self) -> list[Result]:
        with self.lock:
            return self.via_kafka + self.via_door

    def counts(self) -> tuple[int, int]:
        with self.lock:
            return len(self.via_kafka), len(self.via_door)

    def _produce(self) -> None:
        rng = random.Random(21)
        try:
            while not self.stop.is_set():
                result = _result(self.season, rng)

                def on_ok(_meta: Any, result: Result = result) -> None:
                    with self.lock:
                        self.via_kafka.append(result)

                self.producer.send(self.topic, key=result.key(), value=result.value()).add_callback(
                    on_ok
                ).add_errback(self.errors.append)
                self.stop.wait(0.004)  # pacing: a couple of hundred results a second
            self.producer.flush(timeout=130)
        except Exception as exc:
            self.errors.append(exc)

    def _post(self) -> None:
        rng = random.Random(22)
        try:
            while not self.stop.is_set():
                batch = [_result(self.season, rng) for _ in range(DOOR_BATCH)]
                body = [r.message() for r in batch]
                # A batch is posted until answered 202, stop or not: a game server keeps what
                # it has not delivered. Bounded: the broker comes back within the test.
                deadline = time.monotonic() + 2 * KAFKA_REJOIN_SECONDS
                while True:
                    response = self.client.post(URL, body, format="json")
                    with self.lock:
                        self.door_posts += 1
                    if response.status_code == 202:
                        assert response.json() == {"accepted": DOOR_BATCH}
                        with self.lock:
                            self.via_door.extend(batch)
                        break
                    if response.status_code != 503 or time.monotonic() > deadline:
                        self.errors.append((response.status_code, response.content[:300]))
                        return
                    with self.lock:
                        self.door_503 += 1
                    time.sleep(float(response["Retry-After"]))
                self.stop.wait(0.05)
        except Exception as exc:
            self.errors.append(exc)
        finally:
            connection.close()

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=2 * KAFKA_REJOIN_SECONDS)
        self.producer.close(timeout=30)


def _stored(board_id: int) -> int:
    return MatchResult.objects.filter(board_id=board_id).count()


@pytest.mark.usefixtures("on_kafka_cluster")
def test_broker_killed_and_restarted_under_consumer_and_http_door_nothing_lost_or_doubled(
    kafka_cluster_up: KafkaAdminClient,
    topic_and_dlq,
    settings,
    tmp_path: Path,
) -> None:
    admin = kafka_cluster_up
    season = make_season(rule=ScoringRule.CUMULATIVE, status=SeasonStatus.ACTIVE)
    board_id = main_board_id(season.id)
    topic, dlq = topic_and_dlq("broker-death", partitions=3)
    settings.KAFKA_MATCH_RESULTS_TOPIC = topic  # where the HTTP door publishes
    raw_token = game_server_token_create(name="broker-death")[1]
    client = get_board_redis()

    def fully_replicated() -> bool:
        partitions = partitions_of(admin, topic)
        return len(partitions) == 3 and all(len(p["isr_nodes"]) == 3 for p in partitions)

    wait_for("every partition with three in-sync replicas", fully_replicated, 30)
    victim = next(p["leader_id"] for p in partitions_of(admin, topic) if p["partition_index"] == 0)

    group = f"broker-death-{uuid.uuid4().hex[:8]}"
    consumer = ConsumerProcess(topic=topic, dlq=dlq, group=group, log=tmp_path / "consumer.log")
    streams = Streams(season, topic, raw_token)
    restarted = False

    def progress(what: str, kafka: int, door: int, stored: int, timeout: float) -> None:
        """Both feeds acknowledge ``kafka`` and ``door`` more, the consumer stores ``stored``
        more: nobody stopped."""
        k0, d0 = streams.counts()
        s0 = _stored(board_id)

        def going() -> bool:
            assert not streams.errors, streams.errors[:3]
            k, d = streams.counts()
            return k >= k0 + kafka and d >= d0 + door and _stored(board_id) >= s0 + stored

        def context() -> str:
            return f"{what}; {consumer.log_tail()}"

        wait_until(going, timeout=timeout, every=0.2, context=context)

    consumer.start()
    streams.start()
    try:
        progress("before the kill", 200, 3 * DOOR_BATCH, 200, 60)
        out = faults.kafka_broker_kill(victim)
        assert f"killed Kafka node {victim}" in out
        progress("with a broker dead", 500, 5 * DOOR_BATCH, 500, KAFKA_REJOIN_SECONDS)
        assert victim not in unfenced_broker_ids(admin)

        out = faults.kafka_broker_start(victim)
        assert f"started Kafka node {victim}" in out
        restarted = True
        wait_for(
            f"broker {victim} back in the ISR of every partition",
            lambda: all(victim in p["isr_nodes"] for p in partitions_of(admin, topic)),
            KAFKA_REJOIN_SECONDS,
        )
        progress("after the restart", 200, 3 * DOOR_BATCH, 200, 60)
    finally:
        streams.finish()
        if not restarted:
            faults.kafka_broker_start(victim)

    assert not streams.errors, streams.errors[:3]
    acked = streams.acked()
    reference = unique_results(acked)
    assert len(reference) == len(acked)  # every result has its own match id
    expected = expected_board(season, reference)

    def exact() -> bool:
        on_board = board_read(client, keys.board(board_id=board_id))
        return _stored(board_id) == len(reference) and on_board == expected

    try:
        consumer.wait_for(exact, timeout=EXACT_WITHIN_SECONDS)
        assert_boards_match(client, season, reference)  # the daily boards too
        # PostgreSQL holds each result once, even those a retried batch published twice.
        assert _stored(board_id) == len(reference)
        # The consumer went on through it all; it stops cleanly when asked.
        assert consumer.proc is not None
        assert consumer.proc.poll() is None, consumer.log_tail()
        consumer.drain_then_stop(topic=topic, group=group, timeout=60)
    finally:
        consumer.kill_if_running()
    kafka_n, door_n = streams.counts()
    print(
        f"\nacknowledged: {kafka_n} via Kafka, {door_n} via the door "
        f"({streams.door_posts} posts, {streams.door_503} answered 503)"
    )
