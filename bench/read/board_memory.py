"""Redis memory per player on a board: the figure docs/scaling.md sizes the cluster from.

Loads ``--players`` members into one sorted set on the slot's master of the local Redis Cluster
(``LB_REDIS_MODE=cluster make services``), shaped like a board: member = a player id of up to
nine digits (random below ``--id-space``), score = an integer below 2**53 as the codecs write it
(``ScoreCodec.to_redis``). Reports ``MEMORY USAGE <key> SAMPLES 0`` (the key alone, exact) and
the master's ``used_memory`` growth, each divided by the members, then deletes the key.

    .venv/bin/python bench/read/board_memory.py [--players 1000000]
"""

from __future__ import annotations

import argparse
import random
import time

import redis
from redis.cluster import ClusterNode, RedisCluster

HOST = "127.0.0.1"
CHUNK = 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=7000, help="any node of the cluster")
    parser.add_argument("--players", type=int, default=1_000_000)
    parser.add_argument("--id-space", type=int, default=100_000_000)
    args = parser.parse_args()

    cluster = RedisCluster(startup_nodes=[ClusterNode(HOST, args.port)])
    key = "{bench-board-memory}:board"
    node = cluster.get_node_from_key(key)
    master = redis.Redis(host=HOST, port=int(node.port))
    master.delete(key)
    before = int(master.info("memory")["used_memory"])
    rng = random.Random(7)
    ids = rng.sample(range(1, args.id_space), args.players)
    started = time.perf_counter()
    pipe = master.pipeline(transaction=False)
    for offset in range(0, len(ids), CHUNK):
        pipe.zadd(key, {str(i): str(rng.randrange(2**53)) for i in ids[offset : offset + CHUNK]})
        if (offset // CHUNK) % 50 == 49:
            pipe.execute()
    pipe.execute()
    loaded = time.perf_counter() - started
    members = int(master.zcard(key))
    usage = int(master.memory_usage(key, samples=0) or 0)
    after = int(master.info("memory")["used_memory"])
    master.delete(key)
    print(f"{members:,} members on master {node.port} in {loaded:.1f} s")
    print(f"MEMORY USAGE: {usage:,} bytes, {usage / members:.1f} bytes per member")
    grown = after - before
    print(f"used_memory growth: {grown:,} bytes, {grown / members:.1f} bytes per member")


if __name__ == "__main__":
    main()
