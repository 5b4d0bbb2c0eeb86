"""Fixtures shared by the whole suite. Every test talks to the real services.

Isolation: each test gets its own Redis key prefix (``settings.LEADERBOARD_KEY_PREFIX``), and
the session deletes its own prefixes at the end; Kafka tests create their own topics and delete
them afterwards. Several checkouts can run the suite against the same services at once (set
``DJANGO_TEST_DATABASE_NAME`` to give each its own test database).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
import redis
from django.conf import settings as django_settings

from leaderboard.redis import BoardRedis, get_board_redis

_SESSION_TAG = uuid.uuid4().hex[:8]


@pytest.fixture(autouse=True)
def _isolated_board_keys(settings) -> None:
    settings.LEADERBOARD_KEY_PREFIX = f"test-{_SESSION_TAG}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(autouse=True)
def _fresh_season_memo() -> None:
    # The read path memoizes seasons and boards per process; a season of one test must not
    # leak into the next one that reuses its id.
    from seasons.memo import process_memos_clear

    process_memos_clear()


def _unlink_matching(client: BoardRedis, pattern: str) -> None:
    # One UNLINK per key: on a cluster a multi-key UNLINK must stay within one slot, and the
    # session's keys span every slot (redis-py splits it for RedisCluster, but not portably).
    pipe = client.pipeline(transaction=False)
    for key in client.scan_iter(match=pattern, count=1000):
        pipe.unlink(key)
        if len(pipe) >= 500:
            pipe.execute()
    pipe.execute()


@pytest.fixture(scope="session", autouse=True)
def _drop_session_keys() -> Iterator[None]:
    yield
    pattern = f"test-{_SESSION_TAG}-*"
    # The standalone Redis holds the boards in single mode and the cache/Celery keys always;
    # in cluster mode the boards live on the cluster, whose scan_iter walks every master.
    _unlink_matching(redis.Redis.from_url(django_settings.REDIS_URL), pattern)
    if django_settings.LB_REDIS_MODE == "cluster":
        _unlink_matching(get_board_redis(), pattern)


@pytest.fixture
def board_redis() -> BoardRedis:
    """The boards' Redis client, as the application gets it."""
    return get_board_redis()


@pytest.fixture
def kafka_bootstrap() -> list[str]:
    return list(django_settings.KAFKA_BOOTSTRAP_SERVERS)


@pytest.fixture
def kafka_topic_factory(kafka_bootstrap) -> Iterator[Callable[..., str]]:
    """Create fresh, uniquely named topics; they are deleted when the test ends."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap, client_id="tests-admin")
    created: list[str] = []

    def make(prefix: str = "test", partitions: int = 1) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        admin.create_topics(
            [
                NewTopic(
                    name,
                    num_partitions=partitions,
                    replication_factor=django_settings.KAFKA_TOPIC_REPLICATION_FACTOR,
                    topic_configs={
                        "min.insync.replicas": str(django_settings.KAFKA_TOPIC_MIN_INSYNC_REPLICAS)
                    },
                )
            ]
        )
        created.append(name)
        return name

    yield make
    if created:
        try:
            admin.delete_topics(created)
        finally:
            admin.close()
    else:
        admin.close()


@pytest.fixture
def drained_match_results(settings, kafka_topic_factory) -> str:
    """An empty match-results topic and a fresh consumer group of its own: a close-out finds
    nothing queued (a test that never consumes must not wait on the shared topic's backlog)."""
    topic = kafka_topic_factory("match-results")
    settings.KAFKA_MATCH_RESULTS_TOPIC = topic
    settings.KAFKA_CONSUMER_GROUP = f"test-{uuid.uuid4().hex[:12]}"
    return topic
