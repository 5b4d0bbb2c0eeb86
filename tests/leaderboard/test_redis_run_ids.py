"""Who holds the boards' writes, asked of every master: on a cluster, a plain ``INFO`` or
``PING`` reaches one node only, so a restart of another master went unseen by the recovery
(its restart check) and by the consumers' failover watch."""

from __future__ import annotations

from typing import Any

from redis.cluster import RedisCluster

from leaderboard.redis import board_redis_masters, board_redis_run_ids
from leaderboard_project.health import CHECKS


def _masters_run_ids(client: Any) -> dict[str, str]:
    """host:port -> run id of each master serving slots, asked node by node."""
    if not isinstance(client, RedisCluster):
        return {"": str(client.info("server")["run_id"])}
    found = {}
    nodes: dict[str, Any] = client.cluster_nodes()
    for address, node in nodes.items():
        if "master" in node["flags"] and node["slots"]:
            found[address] = str(
                client.get_node(node_name=address).redis_connection.info()["run_id"]
            )
    return found


def _masters_pings(client: Any) -> dict[str, int]:
    """host:port -> PING calls each master counted (INFO commandstats)."""
    connections: dict[str, Any] = {"": client}
    if isinstance(client, RedisCluster):
        nodes: dict[str, Any] = client.cluster_nodes()
        connections = {
            address: client.get_node(node_name=address).redis_connection
            for address, node in nodes.items()
            if "master" in node["flags"] and node["slots"]
        }
    return {
        address: int(connection.info("commandstats").get("cmdstat_ping", {}).get("calls", 0))
        for address, connection in connections.items()
    }


def test_the_health_check_pings_every_master(board_redis) -> None:
    """/healthz's Redis check: a master down on a cluster must not pass for healthy because the
    one node a plain PING reaches answered."""
    before = _masters_pings(board_redis)
    CHECKS["redis"]()
    after = _masters_pings(board_redis)
    assert after.keys() == before.keys()
    assert all(after[address] > before[address] for address in before), (before, after)
    if isinstance(board_redis, RedisCluster):
        assert len(before) == 3


def test_the_run_ids_are_every_masters(board_redis) -> None:
    expected = _masters_run_ids(board_redis)
    assert board_redis_run_ids() == ",".join(sorted(expected.values()))
    if isinstance(board_redis, RedisCluster):
        assert len(expected) == 3  # the local cluster's masters, each one named


def test_the_masters_name_each_masters_run_id(board_redis) -> None:
    """A master restarted within the cluster's node timeout keeps its node id and epoch: only
    its run id changes, so the failover watch must see it."""
    expected = _masters_run_ids(board_redis)
    masters = board_redis_masters()
    if isinstance(board_redis, RedisCluster):
        assert {entry.rsplit("@", 1)[1] for entry in masters} == set(expected.values())
        assert len(masters) == len(expected)
    else:
        assert masters == frozenset(expected.values())
