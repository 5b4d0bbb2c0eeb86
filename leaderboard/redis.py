"""Access to the Redis that holds the boards."""

from __future__ import annotations

import functools
from typing import Any, cast

import redis
from django.conf import settings
from django_redis import get_redis_connection
from redis.cluster import ClusterNode, RedisCluster

# The boards' client: a standalone Redis or a cluster. Both offer the commands the product uses
# (routed by key slot on a cluster, every script's keys in one board's slot) and pipelines; a
# cluster pipeline refuses EVALSHA by name, so pipelined scripts go through
# ``leaderboard.scripts.scripts_pipelined``.
BoardRedis = redis.Redis | RedisCluster


def get_board_redis() -> BoardRedis:
    """The pooled client for the boards' Redis.

    ``settings.LB_REDIS_MODE == "single"``: django-redis's connection for
    ``settings.CACHES["boards"]``. ``"cluster"``: one redis-py ``RedisCluster`` per process,
    seeded with ``settings.REDIS_CLUSTER_NODES``, with the same timeouts and pool size.

    Responses are bytes: member ids and scores are parsed by the callers that know their type.
    """
    if settings.LB_REDIS_MODE == "cluster":
        boards: dict[str, Any] = settings.CACHES["boards"]
        options: dict[str, Any] = boards.get("OPTIONS", {})
        pool: dict[str, Any] = options.get("CONNECTION_POOL_KWARGS", {})
        client = _cluster_client(
            tuple(settings.REDIS_CLUSTER_NODES),
            connect_timeout=options.get("SOCKET_CONNECT_TIMEOUT"),
            socket_timeout=options.get("SOCKET_TIMEOUT"),
            max_connections=pool.get("max_connections"),
        )
        return client
    # django-redis types its connection as Any.
    return cast(redis.Redis, get_redis_connection("boards"))


@functools.cache
def _cluster_client(
    nodes: tuple[str, ...],
    *,
    connect_timeout: float | None,
    socket_timeout: float | None,
    max_connections: int | None,
) -> RedisCluster:
    startup_nodes = []
    for node in nodes:
        host, _, port = node.rpartition(":")
        startup_nodes.append(ClusterNode(host, int(port)))
    kwargs: dict[str, Any] = {}
    if max_connections is not None:
        kwargs["max_connections"] = max_connections
    return RedisCluster(
        startup_nodes=startup_nodes,
        decode_responses=False,
        socket_connect_timeout=connect_timeout,
        socket_timeout=socket_timeout,
        **kwargs,
    )


def board_redis_masters() -> frozenset[str]:
    """Who holds the boards' writes now: one string per master that serves slots.

    Cluster: ``<node id>@<config epoch>`` per master (a promoted replica is another node id,
    with a new epoch); a master marked failed is left out, so the answer changes as soon as the
    cluster notices the death and again at the promotion. Standalone: the server's run id,
    which changes when it restarts (and may have lost its last second of writes).
    Raises ``redis.RedisError`` when no node answers.
    """
    client = get_board_redis()
    if isinstance(client, RedisCluster):
        nodes: dict[str, dict[str, Any]] = client.cluster_nodes()
        return frozenset(
            f"{node['node_id']}@{node['epoch']}"
            for node in nodes.values()
            if "master" in node["flags"] and "fail" not in node["flags"] and node["slots"]
        )
    return frozenset([str(client.info("server")["run_id"])])
