"""Who holds the boards' writes, asked of every master: on a cluster, a plain ``INFO`` or
``PING`` reaches one node only, so a restart of another master went unseen by the recovery
(its restart check) and by the consumers' failover watch."""

from __future__ import annotations

from typing import Any

from redis.cluster import RedisCluster

from leaderboard.redis import board_redis_masters, board_redis_run_ids


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
