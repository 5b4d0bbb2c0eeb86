"""The local three-node Kafka (LB_KAFKA_BROKERS=3): three KRaft nodes, each broker + controller,
a static three-voter quorum.

Node n (1..3): client port LB_KAFKA_CLUSTER_PORT+n-1, controller port
LB_KAFKA_CLUSTER_CONTROLLER_PORT+n-1, folder LOCAL_DIR/kafka-cluster/<n>/ (data/, logs/,
server.properties, kafka.pid). The same jars as the single broker.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from devservices import ports
from devservices.config import HOST, KAFKA_CLUSTER_NODES, Config
from devservices.errors import ServiceError, log, show_log_tail
from devservices.installs import fetch_kafka_libs
from devservices.kafka import cluster_id, format_storage, launch_broker, registered
from devservices.processes import (
    kill_and_wait,
    live_pid,
    pid_running,
    read_pid,
    terminate,
    wait_until,
)
from devservices.render import kafka_node_values, render_template

BROKERS = len(KAFKA_CLUSTER_NODES)


def node_dir(config: Config, node: int) -> Path:
    return config.kafka_cluster_dir / str(node)


def node_pid(config: Config, node: int) -> int | None:
    folder = node_dir(config, node)
    return live_pid(folder / "kafka.pid", f"kafka.Kafka {folder / 'server.properties'}")


def any_running(config: Config) -> bool:
    return any(node_pid(config, n) for n in KAFKA_CLUSTER_NODES)


def all_registered(config: Config) -> bool:
    return registered(config, config.kafka_cluster_bootstrap, BROKERS, config.kafka_cluster_dir)


def node_ready(config: Config, node: int) -> bool:
    """Node ``node`` answers on its own port and the cluster it sees has all three brokers."""
    address = f"{HOST}:{config.kafka_node_port(node)}"
    return registered(config, address, BROKERS, config.kafka_cluster_dir)


def node_answers(config: Config, node: int) -> bool:
    address = f"{HOST}:{config.kafka_node_port(node)}"
    return registered(config, address, 1, config.kafka_cluster_dir)


def check_node(node: str | int) -> int:
    if str(node) not in {str(n) for n in KAFKA_CLUSTER_NODES}:
        raise ServiceError(f"not a Kafka cluster node: '{node}' (1, 2 or 3)")
    return int(node)


def _write_props(config: Config, node: int) -> Path:
    folder = node_dir(config, node)
    (folder / "data").mkdir(parents=True, exist_ok=True)
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    template = config.infra_kafka / "cluster-node.properties.template"
    if not template.is_file():
        raise ServiceError(f"missing {template}")
    values = kafka_node_values(
        node=node,
        port=config.kafka_node_port(node),
        controller_port=config.kafka_node_controller_port(node),
        voters=config.kafka_cluster_voters,
        data_dir=folder / "data",
    )
    props = folder / "server.properties"
    props.write_text(render_template(template.read_text(), values))
    return props


def _format(config: Config, node: int, props: Path) -> None:
    folder = node_dir(config, node)
    if (folder / "data" / "meta.properties").is_file():
        return
    # One cluster id for the three nodes, chosen once.
    cid = cluster_id(config, config.kafka_cluster_dir / "cluster.id")
    log(f"formatting Kafka node {node} storage in {folder / 'data'} (cluster id {cid})")
    # A static quorum (controller.quorum.voters): no --standalone / --initial-controllers.
    format_storage(
        config, props=props, logs=folder / "logs", cid=cid, extra=[], what=f" (node {node})"
    )
    ports_used = f"{config.kafka_node_port(node)} {config.kafka_node_controller_port(node)}"
    (folder / "formatted-ports").write_text(ports_used + "\n")


def launch_node(config: Config, node: int) -> subprocess.Popen[bytes] | None:
    """Launch node ``node`` (None when it runs already); does not wait for it."""
    if node_pid(config, node) is not None:
        return None
    folder = node_dir(config, node)
    (folder / "kafka.pid").unlink(missing_ok=True)
    port, cport = config.kafka_node_port(node), config.kafka_node_controller_port(node)
    for p in (port, cport):
        if ports.port_open(p):
            raise ServiceError(
                f"Kafka node {node}: port {p} is in use ({ports.port_owner(p)}) and node {node} "
                f"is not running from {config.local_dir}; stop it or set LB_KAFKA_CLUSTER_PORT "
                "/ LB_KAFKA_CLUSTER_CONTROLLER_PORT"
            )
    props = _write_props(config, node)
    formatted = folder / "formatted-ports"
    if formatted.is_file() and formatted.read_text().strip() != f"{port} {cport}":
        log(
            f"WARNING: Kafka node {node} was formatted for ports {formatted.read_text().strip()}; "
            f"if it fails to start, delete {config.kafka_cluster_dir}"
        )
    _format(config, node, props)
    log(
        f"starting Kafka node {node} (KRaft broker+controller) on {HOST}:{port}, "
        f"controller :{cport}"
    )
    process = launch_broker(
        config, folder=folder, props=props, logs=folder / "logs", heap=["-Xms256m", "-Xmx512m"]
    )
    (folder / "kafka.pid").write_text(f"{process.pid}\n")
    return process


def _wait_nodes(config: Config, nodes: Sequence[int], condition: Callable[[], bool]) -> None:
    """Wait until ``condition()`` while the nodes in ``nodes`` stay alive."""
    deadline = time.monotonic() + config.start_timeout
    while not condition():
        for node in nodes:
            folder = node_dir(config, node)
            # The raw pid: right after the launch its command line may not be readable yet.
            if not pid_running(read_pid(folder / "kafka.pid")):
                (folder / "kafka.pid").unlink(missing_ok=True)
                show_log_tail(folder / "logs" / "server.log")
                show_log_tail(folder / "logs" / "kafka.out")
                raise ServiceError(
                    f"Kafka node {node} exited during startup; see {folder / 'logs/server.log'} "
                    f"and {folder / 'logs/kafka.out'}"
                )
        if time.monotonic() >= deadline:
            for node in nodes:
                show_log_tail(node_dir(config, node) / "logs" / "server.log")
            listed = " ".join(str(n) for n in nodes)
            raise ServiceError(
                f"Kafka node(s) {listed} did not become ready within "
                f"{config.start_timeout:.0f}s; see {config.kafka_cluster_dir}/<n>/logs/server.log"
            )
        time.sleep(0.5)


def start(config: Config) -> list[str]:
    """Start the three nodes, or reuse a healthy cluster; the brokers another checkout runs."""
    running = sum(1 for n in KAFKA_CLUSTER_NODES if node_pid(config, n))
    bootstrap = config.kafka_cluster_bootstrap
    if running == BROKERS and wait_until(30, lambda: all_registered(config)):
        log(f"Kafka cluster already running (3 brokers on {bootstrap})")
        return []
    # Started from another checkout (its pid files live there): reuse it when all three answer
    # and see each other, as the single services are reused; this checkout's stop leaves it.
    if running == 0 and ports.port_open(config.kafka_node_port(1)) and all_registered(config):
        log(
            f"Kafka cluster: 3 brokers already answering on {bootstrap}, reusing "
            f"(not started from {config.local_dir})"
        )
        return [f"kafka-cluster:{config.kafka_node_port(n)}" for n in KAFKA_CLUSTER_NODES]
    config.kafka_cluster_dir.mkdir(parents=True, exist_ok=True)
    fetch_kafka_libs(config)
    for node in KAFKA_CLUSTER_NODES:
        launch_node(config, node)
    # The quorum needs two voters up before any broker registers: launch all, then wait.
    _wait_nodes(config, KAFKA_CLUSTER_NODES, lambda: all_registered(config))
    pids = " ".join(str(node_pid(config, n) or "?") for n in KAFKA_CLUSTER_NODES)
    log(f"Kafka cluster ready: 3 brokers registered on {bootstrap} (pids {pids})")
    return []


def _stop_node(config: Config, node: int, failures: list[int]) -> None:
    try:
        pid = node_pid(config, node)
        if pid is not None:
            log(f"stopping Kafka node {node} (pid {pid})")
            terminate(pid, f"Kafka node {node}")
        (node_dir(config, node) / "kafka.pid").unlink(missing_ok=True)
    except Exception:
        failures.append(node)
        raise


def stop(config: Config) -> None:
    """All three at once: stopped one by one, the last ones wait for a quorum that is gone."""
    failures: list[int] = []
    threads = [
        threading.Thread(target=_stop_node, args=(config, n, failures))
        for n in KAFKA_CLUSTER_NODES
        if node_pid(config, n)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise ServiceError(f"could not stop Kafka node(s) {failures}")


def kill_node(config: Config, node: int) -> str:
    """SIGKILL node ``node`` (started from this LOCAL_DIR); what was done."""
    node = check_node(node)
    pid = node_pid(config, node)
    folder = node_dir(config, node)
    if pid is None:
        raise ServiceError(
            f"Kafka node {node} is not running from {config.local_dir} (no live pid in "
            f"{folder / 'kafka.pid'})"
        )
    kill_and_wait(pid, f"Kafka node {node}")
    (folder / "kafka.pid").unlink(missing_ok=True)
    return (
        f"killed Kafka node {node} (pid {pid}, {HOST}:{config.kafka_node_port(node)}) with SIGKILL"
    )


def restart_node(config: Config, node: int) -> str:
    """Start node ``node`` again; waits until it answers and 3 unfenced brokers are registered."""
    node = check_node(node)
    pid = node_pid(config, node)
    if pid is not None:
        return f"Kafka node {node} already running (pid {pid})"
    fetch_kafka_libs(config)
    launch_node(config, node)
    _wait_nodes(config, [node], lambda: node_ready(config, node))
    return (
        f"started Kafka node {node} (pid {node_pid(config, node) or '?'}, "
        f"{HOST}:{config.kafka_node_port(node)}); 3 brokers registered"
    )
