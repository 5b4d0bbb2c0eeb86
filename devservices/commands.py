"""start, stop, stop-clusters and status across the services, in their order, under the locks.

Several checkouts / git worktrees may share one set of services: when a port already answers as
the expected service, start reuses it instead of failing, and this checkout's stop leaves it
alone (stop only ever signals pids from this state folder's pid files).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from devservices import health, kafka, kafka_cluster, locks, postgres, redis, redis_cluster
from devservices.config import DB_NAME, DB_PASSWORD, DB_USER, HOST, KAFKA_CLUSTER_NODES, Config
from devservices.errors import ServiceError, log
from devservices.installs import ensure_installed, pg_bin_dir
from devservices.ports import port_open
from devservices.processes import have

STATUS_DOWN = 3


def start(config: Config) -> str:
    """Install what is missing, start (or reuse) every service; the summary to print."""
    reused: list[str] = []
    with locks.held(config.lock_file, "the services"):
        ensure_installed(config)
        for service in (postgres, redis, kafka):
            if service.start(config):
                reused.append(service.NAME)
        if config.redis_cluster or config.kafka_cluster:
            with locks.held(config.cluster_lock_file, "the clusters"):
                if config.redis_cluster:
                    reused += redis_cluster.start(config)
                if config.kafka_cluster:
                    reused += kafka_cluster.start(config)
    return summary_text(config, reused)


def summary_text(config: Config, reused: list[str]) -> str:
    lines = [
        "",
        f"Local services (state in {config.local_dir}):",
        f"  DATABASE_URL=postgres://{DB_USER}:{DB_PASSWORD}@{HOST}:{config.pg_port}/{DB_NAME}",
        f"  REDIS_URL=redis://{HOST}:{config.redis_port}/0",
        f"  KAFKA_BOOTSTRAP_SERVERS={HOST}:{config.kafka_port}",
    ]
    if config.redis_cluster:
        lines.append(
            f"  Redis Cluster (boards, LB_REDIS_MODE=cluster): {redis_cluster.span(config)}; "
            f"state in {config.redis_cluster_dir}"
        )
    if config.kafka_cluster:
        lines.append(
            f"  Kafka cluster (LB_KAFKA_BROKERS=3): {config.kafka_cluster_bootstrap}; "
            f"state in {config.kafka_cluster_dir}"
        )
    logs = []
    if postgres.NAME not in reused:
        logs.append(str(postgres.paths(config).log))
    if redis.NAME not in reused:
        logs.append(str(redis.log_file(config)))
    if kafka.NAME not in reused:
        logs.append(str(config.kafka_logs / "server.log"))
    if logs:
        lines.append(f"Logs: {' '.join(logs)}")
    lines.append("Stop with: python3 -m devservices stop")
    if reused:
        lines.append(
            "Reused (already running from another checkout; this checkout's 'stop' leaves them "
            f"alone): {' '.join(reused)}"
        )
    return "\n".join(lines)


def _each(steps: list[tuple[str, Callable[[], None]]]) -> bool:
    """Run every step, reporting a failure and going on; True when all succeeded."""
    ok = True
    for what, step in steps:
        try:
            step()
        except ServiceError as exc:
            log(f"ERROR: {what}: {exc}")
            ok = False
    return ok


def stop_clusters(config: Config) -> bool:
    with locks.held(config.cluster_lock_file, "the clusters"):
        return _each(
            [
                ("Kafka cluster", lambda: kafka_cluster.stop(config)),
                ("Redis Cluster", lambda: redis_cluster.stop(config)),
            ]
        )


def stop(config: Config) -> bool:
    """Every service this state folder started, whatever LB_REDIS_MODE / LB_KAFKA_BROKERS say;
    in reverse order, going on when one fails. True when all stopped."""
    ok = stop_clusters(config)
    with locks.held(config.lock_file, "the services"):
        steps: list[tuple[str, Callable[[], None]]] = [
            ("Kafka", lambda: kafka.stop(config)),
            ("Redis", lambda: redis.stop(config)),
        ]
        if pg_bin_dir(config) is not None:
            steps.append(("PostgreSQL", lambda: postgres.stop(config)))
        ok = _each(steps) and ok
    return ok


@dataclass(frozen=True)
class Status:
    name: str
    pid: int | None
    port: int
    answers: bool


def status_line(status: Status) -> str:
    if status.pid is not None:
        state = "running"
    elif status.answers:
        state = "running (external)"  # answering, but not started from this LOCAL_DIR
    else:
        state = "stopped"
    answering = "answering" if status.answers else "not answering"
    pid = str(status.pid) if status.pid is not None else "-"
    return f"{status.name:<9} {state:<19} pid={pid:<8} port={status.port:<6} {answering}"


def status(config: Config) -> tuple[list[str], int]:
    """One line per service (and cluster node); exit status 0 when all answer, 3 otherwise."""
    has_cli = have("redis-cli")
    rows = [
        Status("postgres", postgres.running_pid(config), config.pg_port, postgres.answers(config)),
        Status(
            "redis", redis.running_pid(config), config.redis_port, has_cli and redis.answers(config)
        ),
        Status(
            "kafka",
            kafka.running_pid(config),
            config.kafka_port,
            port_open(config.kafka_port) and kafka.answers(config),
        ),
    ]
    lines = [status_line(row) for row in rows]
    healthy = all(row.answers for row in rows)
    if config.redis_cluster or redis_cluster.any_running(config):
        for port in config.redis_cluster_ports:
            row = Status(
                f"rc:{port}",
                redis_cluster.node_pid(config, port),
                port,
                has_cli and health.redis_answers(port),
            )
            lines.append(status_line(row))
            healthy = healthy and row.answers
        state = next(
            (
                s
                for p in config.redis_cluster_ports
                if (s := redis_cluster.cluster_info(p).get("cluster_state"))
            ),
            "",
        )
        healthy = healthy and state == "ok"
        masters = [p for p in config.redis_cluster_ports if health.redis_role(p) == "master"]
        lines.append(
            f"redis-cluster: cluster_state={state or 'unknown'}, masters: "
            + "".join(f"{p} " for p in masters)
        )
    if config.kafka_cluster or kafka_cluster.any_running(config):
        for node in KAFKA_CLUSTER_NODES:
            port = config.kafka_node_port(node)
            row = Status(
                f"kafka-{node}",
                kafka_cluster.node_pid(config, node),
                port,
                port_open(port) and kafka_cluster.node_answers(config, node),
            )
            lines.append(status_line(row))
            healthy = healthy and row.answers
    return lines, 0 if healthy else STATUS_DOWN
