"""Access to the Redis that holds the boards."""

from __future__ import annotations

import functools
import re
from typing import Any, cast

import redis
from django.conf import settings
from django_redis import get_redis_connection
from redis.cluster import ClusterNode, LoadBalancingStrategy, RedisCluster
from redis.exceptions import (
    ClusterDownError,
    ConnectionError,
    RedisClusterException,
    ResponseError,
    SlotNotCoveredError,
    TimeoutError,
    TryAgainError,
)

# The boards' client: a standalone Redis or a cluster. Both offer the commands the product uses
# (routed by key slot on a cluster, every script's keys in one board's slot) and pipelines; a
# cluster pipeline refuses EVALSHA by name, so pipelined scripts go through
# ``leaderboard.scripts.scripts_pipelined``.
BoardRedis = redis.Redis | RedisCluster


def reads_from_replicas() -> bool:
    """Whether ``get_board_read_redis`` may answer from a replica."""
    return bool(settings.LB_REDIS_MODE == "cluster" and settings.REDIS_READ_FROM_REPLICAS)


def get_board_read_redis() -> BoardRedis:
    """The client for the read selectors: ``get_board_redis()``, unless
    ``settings.REDIS_READ_FROM_REPLICAS`` (cluster mode): then a second ``RedisCluster`` with
    a load-balancing strategy, whose connections to replicas are in READONLY mode and which sends
    read-only commands to a slot's master and replicas in turn (read-only scripts: see
    ``leaderboard.scripts.read_script_call``). Never for writes: a replica refuses them.
    """
    if reads_from_replicas():
        return _cluster_client(*_cluster_options(), read_from_replicas=True)
    return get_board_redis()


def _cluster_options() -> tuple[tuple[str, ...], float | None, float | None, int | None]:
    boards: dict[str, Any] = settings.CACHES["boards"]
    options: dict[str, Any] = boards.get("OPTIONS", {})
    pool: dict[str, Any] = options.get("CONNECTION_POOL_KWARGS", {})
    return (
        tuple(settings.REDIS_CLUSTER_NODES),
        options.get("SOCKET_CONNECT_TIMEOUT"),
        options.get("SOCKET_TIMEOUT"),
        pool.get("max_connections"),
    )


def get_board_redis() -> BoardRedis:
    """The pooled client for the boards' Redis.

    ``settings.LB_REDIS_MODE == "single"``: django-redis's connection for
    ``settings.CACHES["boards"]``. ``"cluster"``: one redis-py ``RedisCluster`` per process,
    seeded with ``settings.REDIS_CLUSTER_NODES``, with the same timeouts and pool size.

    Responses are bytes: member ids and scores are parsed by the callers that know their type.
    """
    if settings.LB_REDIS_MODE == "cluster":
        return _cluster_client(*_cluster_options())
    # django-redis types its connection as Any.
    return cast(redis.Redis, get_redis_connection("boards"))


@functools.cache
def _cluster_client(
    nodes: tuple[str, ...],
    connect_timeout: float | None,
    socket_timeout: float | None,
    max_connections: int | None,
    *,
    read_from_replicas: bool = False,
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
        # ROUND_ROBIN is what the deprecated read_from_replicas=True means: master and replicas
        # in turn; it also puts the connections to replicas in READONLY mode.
        load_balancing_strategy=LoadBalancingStrategy.ROUND_ROBIN if read_from_replicas else None,
        **kwargs,
    )


def board_redis_masters() -> frozenset[str]:
    """Who holds the boards' writes now: one string per master that serves slots.

    Cluster: ``<node id>@<config epoch>@<run id>`` per master (a promoted replica is another
    node id, with a new epoch; a restarted master, another run id); a master marked failed is
    left out, so the answer changes as soon as the cluster notices the death and again at the
    promotion. Standalone: the server's run id,
    which changes when it restarts (and may have lost its last second of writes).
    Raises ``redis.RedisError`` when no node answers, or (cluster) a master does not.
    """
    client = get_board_redis()
    if isinstance(client, RedisCluster):
        masters = _cluster_masters(client)
        # With each master's run id: a master that restarts (from its AOF, maybe without its
        # last second) within the cluster's node timeout keeps its node id and epoch, and is
        # never marked failed; only its run id tells.
        run_ids = _cluster_run_ids(client, addresses=list(masters))
        return frozenset(
            f"{node['node_id']}@{node['epoch']}@{run_ids[address]}"
            for address, node in masters.items()
        )
    return frozenset([str(client.info("server")["run_id"])])


def board_redis_run_ids() -> str:
    """The run id of every server holding the boards' writes, as one string that changes when
    any of them restarts or is replaced (a cluster: every master's, not the one node a plain
    ``INFO`` reaches). Raises ``redis.RedisError`` when a master does not answer."""
    client = get_board_redis()
    if isinstance(client, RedisCluster):
        addresses = list(_cluster_masters(client))
        return ",".join(sorted(_cluster_run_ids(client, addresses=addresses).values()))
    return str(client.info("server")["run_id"])


def board_redis_ping() -> None:
    """A round trip to every server holding the boards' writes. On a cluster a plain ``PING``
    reaches one node, so a master that is down (its boards' reads and writes failing until the
    cluster promotes a replica) passed for healthy. Raises ``redis.RedisError`` when one does
    not answer."""
    client = get_board_redis()
    if isinstance(client, RedisCluster):
        client.ping(target_nodes=RedisCluster.PRIMARIES)
        return
    client.ping()


def _cluster_masters(client: RedisCluster) -> dict[str, dict[str, Any]]:
    """``host:port`` -> CLUSTER NODES entry of each master serving slots, not marked failed."""
    nodes: dict[str, dict[str, Any]] = client.cluster_nodes()
    return {
        address: node
        for address, node in nodes.items()
        if "master" in node["flags"] and "fail" not in node["flags"] and node["slots"]
    }


def _cluster_run_ids(client: RedisCluster, *, addresses: list[str]) -> dict[str, str]:
    """``host:port`` -> run id, asked of each node itself. Raises ``redis.RedisError`` when one
    does not answer: the answer is then unknown, not changed (a master that is down is left out
    of the masters once the cluster marks it failed)."""
    found: dict[str, str] = {}
    for address in addresses:
        node = client.get_node(node_name=address)
        if node is None:
            raise redis.ConnectionError(f"{address}: not among the cluster client's nodes")
        info: Any = client.info("server", target_nodes=node)
        found[address] = str(info["run_id"])
    return found


# What Redis down, restarting, loading or failing over raises: refused, dropped or timed-out
# connections and LOADING (BusyLoadingError is a ConnectionError), CLUSTERDOWN and MASTERDOWN
# (MasterDownError is a ClusterDownError), TRYAGAIN (a slot migrating or failing over), a slot
# no master serves yet. Not RedisError as a whole: a WRONGTYPE, a script error or an argument
# Redis refuses is a bug, and must stay a 500 rather than pass for an outage.
_REDIS_UNAVAILABLE: tuple[type[Exception], ...] = (
    ConnectionError,
    TimeoutError,
    ClusterDownError,
    TryAgainError,
    SlotNotCoveredError,
)
# BUSY (a script or DEBUG SLEEP running past busy-reply-threshold) has no class in redis-py: a
# plain ResponseError, whose message a pipeline prefixes with the failed command.
_BUSY_REPLY = re.compile(r"(^|caused error: )BUSY\b")
# What RedisCluster raises when no startup node answers, or when the nodes it reached leave
# slots uncovered (a failover in progress): not a RedisError, and only told apart by its text.
_CLUSTER_UNREACHABLE = ("Redis Cluster cannot be connected", "All slots are not covered")


def redis_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says Redis cannot serve now (down, restarting, loading its dataset,
    busy, failing over): a 503 with Retry-After for a read, never a 500. Follows ``raise ...
    from`` causes, so a connection error wrapped on purpose counts too (not the implicit
    context: a bug raised while handling a failed replica read is still a bug)."""
    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, _REDIS_UNAVAILABLE):
            return True
        if isinstance(error, ResponseError) and _BUSY_REPLY.search(str(error)):
            return True
        if type(error) is RedisClusterException and str(error).startswith(_CLUSTER_UNREACHABLE):
            return True
        error = error.__cause__
    return False
