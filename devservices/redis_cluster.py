"""The local Redis Cluster (LB_REDIS_MODE=cluster): three masters and three replicas.

One redis-server per port, LB_REDIS_CLUSTER_PORT .. +5, each with its own folder
LOCAL_DIR/redis-cluster/<port>/ (redis.conf, nodes.conf, the AOF, redis.pid, redis.log). The
standalone Redis keeps running: Celery's broker and Django's cache stay there.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from devservices import health, ports
from devservices.config import HOST, Config
from devservices.errors import ServiceError, log, show_log_tail
from devservices.processes import have, kill_and_wait, live_pid, wait_until
from devservices.redis import launch, stop_pid
from devservices.render import redis_cluster_node_conf


def node_dir(config: Config, port: int) -> Path:
    return config.redis_cluster_dir / str(port)


def node_pid(config: Config, port: int) -> int | None:
    return live_pid(node_dir(config, port) / "redis.pid", "redis-server")


def cluster_info(port: int) -> dict[str, str]:
    return health.redis_info(port, "CLUSTER", "INFO")


def healthy_from(port: int) -> bool:
    return health.cluster_healthy(cluster_info(port))


def all_healthy(config: Config) -> bool:
    return all(healthy_from(p) for p in config.redis_cluster_ports)


def any_running(config: Config) -> bool:
    return any(node_pid(config, p) for p in config.redis_cluster_ports)


def span(config: Config) -> str:
    ports_ = config.redis_cluster_ports
    return f"{HOST}:{ports_[0]}-{ports_[-1]}"


def start_node(config: Config, port: int) -> bool:
    """Start one node (a no-op when it runs); True when another checkout's node is reused.
    Never touches a foreign process."""
    folder = node_dir(config, port)
    pid = node_pid(config, port)
    if pid is not None:
        if not wait_until(15, lambda: health.redis_answers(port)):
            raise ServiceError(
                f"Redis cluster node {port} (pid {pid}) runs but does not answer PING; "
                f"see {folder / 'redis.log'}"
            )
        return False
    if ports.port_open(port):
        enabled = health.redis_info(port, "INFO", "cluster").get("cluster_enabled") == "1"
        if health.redis_answers(port) and enabled:
            log(
                f"Redis cluster node {port}: already answering (not started from "
                f"{config.local_dir}), reusing"
            )
            return True
        raise ServiceError(
            f"port {port} is in use by another process ({ports.port_owner(port)}) that is not "
            "a Redis cluster node; stop it or set LB_REDIS_CLUSTER_PORT"
        )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "redis.pid").unlink(missing_ok=True)
    conf = folder / "redis.conf"
    conf.write_text(redis_cluster_node_conf(port=port, directory=folder))
    launch(conf, folder / "redis.log", f"cluster node {port}")
    if not wait_until(config.start_timeout, lambda: health.redis_answers(port)):
        show_log_tail(folder / "redis.log")
        raise ServiceError(
            f"Redis cluster node {port} did not answer PING within "
            f"{config.start_timeout:.0f}s; see {folder / 'redis.log'}"
        )
    wait_until(10, lambda: node_pid(config, port))
    log(f"Redis cluster node {port} started (pid {node_pid(config, port) or '?'})")
    return False


def start(config: Config) -> list[str]:
    """Start the six nodes and create the cluster once; the nodes another checkout runs."""
    if not have("redis-cli"):
        raise ServiceError("redis-cli missing")
    reused = [f"redis-cluster:{p}" for p in config.redis_cluster_ports if start_node(config, p)]
    # Created already (by an earlier run): every node knows the other five.
    if all_healthy(config) or wait_until(15, lambda: all_healthy(config)):
        log(f"Redis Cluster ready on {span(config)} (reused)")
        return reused
    infos = [cluster_info(p) for p in config.redis_cluster_ports]
    if health.cluster_never_created(infos):
        log("creating the Redis Cluster (3 masters, 3 replicas)")
        create_log = config.redis_cluster_dir / "create.log"
        with create_log.open("w") as out:
            done = subprocess.run(
                ["redis-cli", "--cluster", "create"]
                + [f"{HOST}:{p}" for p in config.redis_cluster_ports]
                + ["--cluster-replicas", "1", "--cluster-yes"],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                check=False,
            )
        if done.returncode != 0:
            show_log_tail(create_log)
            raise ServiceError(f"redis-cli --cluster create failed; see {create_log}")
    else:
        log(
            "the Redis Cluster exists but is not healthy yet (a failover or a node catching "
            "up?); waiting"
        )
    if not wait_until(config.start_timeout, lambda: all_healthy(config)):
        for p in config.redis_cluster_ports:
            info = cluster_info(p)
            log(
                f"node {p}: state={info.get('cluster_state', '')} "
                f"known_nodes={info.get('cluster_known_nodes', '')} "
                f"slots_assigned={info.get('cluster_slots_assigned', '')}"
            )
        raise ServiceError(
            "the Redis Cluster did not reach cluster_state:ok with 6 nodes within "
            f"{config.start_timeout:.0f}s (state under {config.redis_cluster_dir}; if it was "
            "half-created, stop-clusters and delete that folder)"
        )
    log(f"Redis Cluster ready on {span(config)}")
    return reused


def stop(config: Config) -> None:
    for port in config.redis_cluster_ports:
        stop_pid(
            node_pid(config, port),
            node_dir(config, port) / "redis.pid",
            f"Redis cluster node {port}",
        )


def check_port(config: Config, port: int) -> None:
    if port not in config.redis_cluster_ports:
        listed = " ".join(str(p) for p in config.redis_cluster_ports)
        raise ServiceError(f"{port} is not a port of the local Redis Cluster ({listed})")


def kill_node(config: Config, port: int) -> str:
    """SIGKILL the node on ``port`` (started from this LOCAL_DIR); what was done."""
    check_port(config, port)
    pid = node_pid(config, port)
    if pid is None:
        raise ServiceError(
            f"Redis cluster node {port} is not running from {config.local_dir} (no live pid "
            f"in {node_dir(config, port) / 'redis.pid'})"
        )
    role = health.redis_role(port)
    kill_and_wait(pid, f"Redis cluster node {port}")
    return f"killed Redis cluster node {port} (pid {pid}, was {role}) with SIGKILL"


def restart_node(config: Config, port: int) -> str:
    """Start the node on ``port`` again and wait until it rejoined (it reads its nodes.conf
    and gossips with the others); what was done."""
    check_port(config, port)
    pid = node_pid(config, port)
    if pid is not None:
        return f"Redis cluster node {port} already running (pid {pid}, {health.redis_role(port)})"
    start_node(config, port)
    if not wait_until(config.start_timeout, lambda: healthy_from(port)):
        raise ServiceError(
            f"Redis cluster node {port} started but does not see a healthy cluster within "
            f"{config.start_timeout:.0f}s; see {node_dir(config, port) / 'redis.log'}"
        )
    return (
        f"started Redis cluster node {port} (pid {node_pid(config, port) or '?'}, "
        f"now {health.redis_role(port)})"
    )
