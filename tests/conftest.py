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
from django.test import Client

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
def topic_and_dlq(kafka_topic_factory) -> Callable[..., tuple[str, str]]:
    """``topic_and_dlq(prefix, partitions=1)``: a fresh topic and its dead-letter topic (one
    partition, named after it), as a consumer under test reads and dead-letters them."""

    def make(prefix: str, partitions: int = 1) -> tuple[str, str]:
        topic = kafka_topic_factory(prefix, partitions=partitions)
        return topic, kafka_topic_factory(f"{prefix}-dlq")

    return make


@pytest.fixture
def drained_match_results(settings, kafka_topic_factory) -> str:
    """An empty match-results topic and a fresh consumer group of its own: a close-out finds
    nothing queued (a test that never consumes must not wait on the shared topic's backlog)."""
    topic = kafka_topic_factory("match-results")
    settings.KAFKA_MATCH_RESULTS_TOPIC = topic
    settings.KAFKA_CONSUMER_GROUP = f"test-{uuid.uuid4().hex[:12]}"
    return topic


@pytest.fixture
def staff(client: Client) -> Client:
    """The test client, logged in as a superuser (username "staff")."""
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_superuser("staff", "staff@example.com", "pw")
    client.force_login(user)
    return client


# --- the cluster pass cannot pass empty -----------------------------------------------------------
#
# Tests marked ``clusters`` skip on the single-node services. In the cluster pass (both
# LB_REDIS_MODE=cluster and LB_KAFKA_BROKERS=3, as `make test-cluster` exports them) none may
# skip: a cluster that is not healthy, or a pass that collected none of them, fails the run
# instead of going green having tested nothing on the clusters.

_CLUSTER_OUTCOMES: dict[str, str] = {}
_CLUSTER_NODEIDS: set[str] = set()


def _cluster_pass() -> bool:
    return django_settings.LB_REDIS_MODE == "cluster" and django_settings.LB_KAFKA_BROKERS == 3


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    _CLUSTER_NODEIDS.update(i.nodeid for i in items if i.get_closest_marker("clusters"))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.nodeid not in _CLUSTER_NODEIDS:
        return
    if report.skipped or report.failed:
        _CLUSTER_OUTCOMES[report.nodeid] = "skipped" if report.skipped else "failed"
    elif report.when == "call":
        _CLUSTER_OUTCOMES.setdefault(report.nodeid, "passed")


def _cluster_pass_problem() -> str | None:
    if not _cluster_pass() or not _CLUSTER_NODEIDS:
        return None
    skipped = sorted(n for n, o in _CLUSTER_OUTCOMES.items() if o == "skipped")
    if skipped:
        return f"{len(skipped)} cluster test(s) skipped in the cluster pass: {skipped[:5]}"
    if not any(o == "passed" for o in _CLUSTER_OUTCOMES.values()):
        return "the cluster pass ran none of its cluster tests"
    return None


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _cluster_pass_problem() is not None and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter) -> None:
    stats = terminalreporter.stats
    counts = {k: len(stats.get(k, [])) for k in ("passed", "failed", "error", "skipped")}
    mode = "cluster pass" if _cluster_pass() else "single-node pass"
    ran = sum(1 for o in _CLUSTER_OUTCOMES.values() if o == "passed")
    terminalreporter.write_line(
        f"{mode}: {counts['passed']} passed, {counts['failed']} failed, {counts['error']} errors, "
        f"{counts['skipped']} skipped; cluster-marked tests passed: "
        f"{ran} of {len(_CLUSTER_NODEIDS)}"
    )
    problem = _cluster_pass_problem()
    if problem is not None:
        terminalreporter.write_line(f"FAILED: {problem}", red=True)
