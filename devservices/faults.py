"""Fault injection on the local clusters, for the failover tests (tests/infra/) and for drills
by hand: SIGKILL one node, start it again. Each call acts only on nodes this state folder
(LB_LOCAL_DIR) started, holds the clusters' lock (not the shared services' one), and returns a
sentence saying what it did; a failure raises ServiceError with the reason.

    from devservices import faults
    faults.redis_cluster_kill(7000)    # "killed Redis cluster node 7000 (pid ..., was master) ..."
    faults.redis_cluster_start(7000)   # waits until the node sees cluster_state:ok
    faults.kafka_broker_kill(2)        # node 2, 127.0.0.1:19093
    faults.kafka_broker_start(2)       # waits until 3 unfenced brokers are registered

The configuration is read from the environment when not given (the same LB_* variables as
``python3 -m devservices``).
"""

from __future__ import annotations

from devservices import kafka_cluster, locks, redis_cluster
from devservices.config import Config


def _config(config: Config | None) -> Config:
    return Config.from_env() if config is None else config


def redis_cluster_kill(port: int, config: Config | None = None) -> str:
    config = _config(config)
    with locks.held(config.cluster_lock_file, "the clusters"):
        return redis_cluster.kill_node(config, port)


def redis_cluster_start(port: int, config: Config | None = None) -> str:
    config = _config(config)
    with locks.held(config.cluster_lock_file, "the clusters"):
        return redis_cluster.restart_node(config, port)


def kafka_broker_kill(node: int, config: Config | None = None) -> str:
    config = _config(config)
    with locks.held(config.cluster_lock_file, "the clusters"):
        return kafka_cluster.kill_node(config, node)


def kafka_broker_start(node: int, config: Config | None = None) -> str:
    config = _config(config)
    with locks.held(config.cluster_lock_file, "the clusters"):
        return kafka_cluster.restart_node(config, node)
