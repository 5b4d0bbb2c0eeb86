"""Settings for a machine running the local services of devservices, clusters included.

``make run``, ``make test`` (through ``settings_test``) and the benchmarks choose this module
(DJANGO_SETTINGS_MODULE). It reads the same LB_* variables as devservices, which starts
the local Redis Cluster (LB_REDIS_MODE=cluster: six nodes from LB_REDIS_CLUSTER_PORT) and the
three-broker Kafka (LB_KAFKA_BROKERS=3: from LB_KAFKA_CLUSTER_PORT), and makes their addresses
the defaults of the variables the production settings read: REDIS_CLUSTER_NODES,
KAFKA_BOOTSTRAP_SERVERS, KAFKA_TOPIC_REPLICATION_FACTOR (3) and
KAFKA_TOPIC_MIN_INSYNC_REPLICAS (2); the single-node services' URLs (DATABASE_URL, REDIS_URL,
CACHE_URL, CELERY_BROKER_URL, KAFKA_BOOTSTRAP_SERVERS) follow LB_PG_PORT, LB_REDIS_PORT and
LB_KAFKA_PORT. A variable that is set keeps its value.

The defaults go into the process environment, before the production settings read it, so the
production module's checks see them and every process this one starts inherits them.
"""

import os

from django.core.exceptions import ImproperlyConfigured

from .env import StrictEnv

_env = StrictEnv()


def _default(name: str, value: str) -> None:
    # An empty variable counts as unset, as everywhere (leaderboard_project/env.py).
    if not _env.str(name, default="").strip():
        os.environ[name] = value


LB_KAFKA_BROKERS = _env.int("LB_KAFKA_BROKERS", default=1)
if LB_KAFKA_BROKERS not in {1, 3}:
    raise ImproperlyConfigured(f"LB_KAFKA_BROKERS={LB_KAFKA_BROKERS}: use 1 or 3")
_redis_cluster_port = _env.int("LB_REDIS_CLUSTER_PORT", default=7000)
LOCAL_REDIS_CLUSTER_NODES = [f"127.0.0.1:{_redis_cluster_port + i}" for i in range(6)]
_kafka_cluster_port = _env.int("LB_KAFKA_CLUSTER_PORT", default=19092)
LOCAL_KAFKA_CLUSTER_BROKERS = [f"127.0.0.1:{_kafka_cluster_port + i}" for i in range(3)]

# The single-node services on the ports devservices gives them (LB_PG_PORT, LB_REDIS_PORT,
# LB_KAFKA_PORT): a checkout whose services run on other ports (another worktree beside the
# shared ones) needs no URL of its own.
_pg_port = _env.int("LB_PG_PORT", default=5432)
_redis_port = _env.int("LB_REDIS_PORT", default=6379)
_default("DATABASE_URL", f"postgres://leaderboard:leaderboard@127.0.0.1:{_pg_port}/leaderboard")
_default("REDIS_URL", f"redis://127.0.0.1:{_redis_port}/0")
_default("CACHE_URL", f"redis://127.0.0.1:{_redis_port}/1")
_default("CELERY_BROKER_URL", f"redis://127.0.0.1:{_redis_port}/2")

if _env.str("LB_REDIS_MODE", default="single").strip().lower() == "cluster":
    _default("REDIS_CLUSTER_NODES", ",".join(LOCAL_REDIS_CLUSTER_NODES))
if LB_KAFKA_BROKERS == 3:
    _default("KAFKA_BOOTSTRAP_SERVERS", ",".join(LOCAL_KAFKA_CLUSTER_BROKERS))
    _default("KAFKA_TOPIC_REPLICATION_FACTOR", "3")
    _default("KAFKA_TOPIC_MIN_INSYNC_REPLICAS", "2")
else:
    _default("KAFKA_BOOTSTRAP_SERVERS", f"127.0.0.1:{_env.int('LB_KAFKA_PORT', default=9092)}")

from .settings import *  # noqa: E402, F403
