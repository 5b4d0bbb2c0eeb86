"""How stale a read from a replica is: the time from a write's acknowledgement by its master to
the replica answering the new value (REDIS_READ_FROM_REPLICAS, docs/operations.md).

Against the local Redis Cluster (``LB_REDIS_MODE=cluster make services``). For ``--samples``
writes, one at a time: ZADD a member's new score on the slot's master, then poll the replica
(ZSCORE on a READONLY connection, back to back) until it answers that score; the lag is from the
ZADD's reply to the first fresh answer. Two phases: idle, then with another process pushing
pipelined ZADD batches of ``--load-batch`` members into another key of the same slot as fast
as it can (ingestion's write shape: big pipelined writes on the master the replica follows).

    .venv/bin/python bench/read/replica_lag.py [--samples 2000] [--load-batch 5000]
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import statistics
import time
from typing import Any

import redis
from redis.cluster import ClusterNode, RedisCluster

HOST = "127.0.0.1"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _phase(master: redis.Redis, replica: redis.Redis, key: str, samples: int) -> list[float]:
    lags = []
    for i in range(samples):
        master.zadd(key, {"probe": i})
        acked = time.perf_counter()
        while replica.zscore(key, "probe") != float(i):
            pass
        lags.append((time.perf_counter() - acked) * 1000)
    return lags


def _load(port: int, key: str, batch: int, stop: Any, written: Any) -> None:
    writer = redis.Redis(host=HOST, port=port)
    rng = random.Random(1)
    while not stop.is_set():
        pipe = writer.pipeline(transaction=False)
        for _ in range(batch // 500):
            pipe.zadd(key, {str(rng.randrange(10**7)): rng.random() for _ in range(500)})
        pipe.execute()
        with written.get_lock():
            written.value += batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=7000, help="any node of the cluster")
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--load-batch", type=int, default=5000)
    args = parser.parse_args()

    cluster = RedisCluster(startup_nodes=[ClusterNode(HOST, args.port)])
    key = "{bench-replica-lag}:board"
    load_key = "{bench-replica-lag}:load"
    master_node = cluster.get_node_from_key(key)
    replica_node = cluster.get_node_from_key(key, replica=True)
    if replica_node is None:
        raise SystemExit(f"the slot of {key} has no replica")
    master = redis.Redis(host=HOST, port=int(master_node.port))
    replica = redis.Redis(host=HOST, port=int(replica_node.port))
    replica.execute_command("READONLY")

    report = {"idle": _phase(master, replica, key, args.samples)}

    # The writer is another process: in this one it would hold the GIL against the poller and
    # the lag would measure Python, not replication.
    stop = multiprocessing.Event()
    written = multiprocessing.Value("q", 0)
    loader = multiprocessing.Process(
        target=_load, args=(int(master_node.port), load_key, args.load_batch, stop, written)
    )
    loader.start()
    time.sleep(1.0)  # the load running before the first sample
    started, before = time.perf_counter(), written.value
    report["under write load"] = _phase(master, replica, key, args.samples)
    rate = (written.value - before) / (time.perf_counter() - started)
    stop.set()
    loader.join(timeout=30)
    master.delete(key, load_key)

    print(f"master {master_node.port}, replica {replica_node.port}, {args.samples} samples each")
    for phase, lags in report.items():
        print(
            f"{phase:>17}: p50 {statistics.median(lags):.3f} ms, p99 {_percentile(lags, 0.99):.3f}"
            f" ms, max {max(lags):.3f} ms"
        )
    print(f"load: {rate:,.0f} ZADD members/s on the master during the second phase")


if __name__ == "__main__":
    main()
