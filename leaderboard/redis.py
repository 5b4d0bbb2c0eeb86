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
