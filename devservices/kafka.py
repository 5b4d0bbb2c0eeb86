"""Apache Kafka, single-node KRaft (broker + controller in one JVM) on 127.0.0.1:LB_KAFKA_PORT,
controller LB_KAFKA_CONTROLLER_PORT, and the FAULTS listener the suite's outage test reaches
through a proxy (LB_KAFKA_FAULTS_PORT, advertising LB_KAFKA_FAULTS_PROXY_PORT). State, jars and
logs in LOCAL_DIR/kafka/. The JVM helpers here serve the three-node cluster too."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from devservices import health, ports
from devservices.config import HOST, Config
from devservices.errors import ServiceError, log, show_log_tail
from devservices.installs import fetch_kafka_libs
from devservices.processes import live_pid, terminate, wait_until
from devservices.render import kafka_single_values, render_template

NAME = "Kafka"
VERSION = "4.3.1"


# --- the JVM --------------------------------------------------------------------------------


def java_command(config: Config, logs: Path, *args: str, heap: Sequence[str] = ()) -> list[str]:
    return [
        "java",
        *heap,
        "-Xshare:auto",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={config.infra_kafka / 'log4j2.yaml'}",
        f"-Dkafka.logs.dir={logs}",
        "-cp",
        f"{config.kafka_libs}/*",
        *args,
    ]


def random_cluster_id(config: Config) -> str:
    done = subprocess.run(
        java_command(config, config.kafka_logs, "kafka.tools.StorageTool", "random-uuid"),
        capture_output=True,
        text=True,
        check=False,
    )
    lines = done.stdout.split()
    if done.returncode != 0 or not lines:
        raise ServiceError("kafka StorageTool random-uuid failed")
    return lines[-1]


def cluster_id(config: Config, id_file: Path) -> str:
    """The id in ``id_file``, chosen once."""
    if id_file.is_file() and id_file.read_text().strip():
        return id_file.read_text().strip()
    chosen = random_cluster_id(config)
    id_file.write_text(chosen + "\n")
    return chosen


def format_storage(
    config: Config, *, props: Path, logs: Path, cid: str, extra: Sequence[str], what: str
) -> None:
    format_log = logs / "format.log"
    with format_log.open("w") as out:
        done = subprocess.run(
            java_command(
                config,
                logs,
                "kafka.tools.StorageTool",
                "format",
                *extra,
                "-t",
                cid,
                "-c",
                str(props),
            ),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    if done.returncode != 0:
        show_log_tail(format_log)
        raise ServiceError(f"kafka storage format{what} failed; see {format_log}")


def launch_broker(
    config: Config, *, folder: Path, props: Path, logs: Path, heap: Sequence[str]
) -> subprocess.Popen[bytes]:
    """The JVM in its own session, stdio detached: it must not keep the caller's terminal or
    pipes open, nor die with its process group. Its pid is the JVM's (no wrapper)."""
    logs.mkdir(parents=True, exist_ok=True)
    with (logs / "kafka.out").open("ab") as out:
        return subprocess.Popen(
            java_command(
                config,
                logs,
                "kafka.Kafka",
                str(props),
                heap=[
                    *heap,
                    "-XX:+UseG1GC",
                    "-XX:MaxGCPauseMillis=20",
                    "-XX:+ExitOnOutOfMemoryError",
                ],
            ),
            cwd=folder,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def java_registered(config: Config, bootstrap: str, want: int, check_dir: Path) -> bool:
    """LB_KAFKA_CHECKER=java: Kafka's own BrokerApiVersionsCommand, one "(id: N" line per
    registered broker."""
    cfg = check_dir / "check-client.properties"
    if not cfg.is_file():
        # Short timeouts: an AdminClient otherwise waits 60 s for a down broker.
        cfg.write_text("request.timeout.ms=3000\ndefault.api.timeout.ms=5000\n")
    try:
        done = subprocess.run(
            [
                "java",
                "-Xshare:auto",
                "-XX:TieredStopAtLevel=1",
                "-Xmx128m",
                "-cp",
                f"{config.kafka_libs}/*",
                "org.apache.kafka.tools.BrokerApiVersionsCommand",
                "--bootstrap-server",
                bootstrap,
                "--command-config",
                str(cfg),
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False
    return done.stdout.count("(id: ") >= want


def registered(config: Config, bootstrap: str, want: int, check_dir: Path) -> bool:
    """At least ``want`` registered, unfenced brokers through ``bootstrap`` (a real request)."""
    if config.kafka_checker == "java":
        return java_registered(config, bootstrap, want, check_dir)
    return health.kafka_registered(bootstrap, want)


# --- the single broker ----------------------------------------------------------------------


def pid_file(config: Config) -> Path:
    return config.kafka_dir / "kafka.pid"


def props_file(config: Config) -> Path:
    return config.kafka_dir / "server.properties"


def running_pid(config: Config) -> int | None:
    return live_pid(pid_file(config), "kafka.Kafka")


def answers_on(config: Config, address: str) -> bool:
    return registered(config, address, 1, config.kafka_dir)


def answers(config: Config) -> bool:
    return answers_on(config, f"{HOST}:{config.kafka_port}")


def _write_props(config: Config) -> None:
    template = config.infra_kafka / "server.properties.template"
    if not template.is_file():
        raise ServiceError(f"missing {template}")
    data = config.kafka_dir / "data"
    data.mkdir(parents=True, exist_ok=True)
    values = kafka_single_values(
        port=config.kafka_port,
        controller_port=config.kafka_controller_port,
        faults_port=config.kafka_faults_port,
        faults_proxy_port=config.kafka_faults_proxy_port,
        data_dir=data,
    )
    props_file(config).write_text(render_template(template.read_text(), values))


def _format(config: Config) -> None:
    data = config.kafka_dir / "data"
    if (data / "meta.properties").is_file():
        return
    cid = cluster_id(config, config.kafka_dir / "cluster.id")
    log(f"formatting Kafka storage in {data} (cluster id {cid})")
    # --standalone: a single-node dynamic KRaft quorum (controller.quorum.bootstrap.servers).
    format_storage(
        config,
        props=props_file(config),
        logs=config.kafka_logs,
        cid=cid,
        extra=["--standalone"],
        what="",
    )
    ports_used = f"{config.kafka_port} {config.kafka_controller_port}"
    (config.kafka_dir / "formatted-ports").write_text(ports_used + "\n")


def start(config: Config) -> bool:
    """Start it, or reuse the broker answering on the port; True when reused (not ours)."""
    config.kafka_logs.mkdir(parents=True, exist_ok=True)
    server_log = config.kafka_logs / "server.log"
    pid = running_pid(config)
    if pid is not None:
        # Never refetch jars under a running broker (the pom may have changed).
        if config.kafka_checker == "java":
            fetch_kafka_libs(config)
        if wait_until(config.start_timeout, lambda: answers(config)):
            log(f"Kafka already running (pid {pid}, port {config.kafka_port})")
            return False
        raise ServiceError(
            f"Kafka pid {pid} is running but does not answer on {HOST}:{config.kafka_port}; "
            f"see {server_log}"
        )
    pid_file(config).unlink(missing_ok=True)
    if ports.port_open(config.kafka_port):
        if config.kafka_checker == "java":
            fetch_kafka_libs(config)  # the java checker needs the jars
        if answers(config):
            log(
                f"Kafka: already answering on port {config.kafka_port}, reusing "
                f"(not started from {config.local_dir})"
            )
            return True
        raise ServiceError(
            f"port {config.kafka_port} is in use by another process "
            f"({ports.port_owner(config.kafka_port)}) that does not answer as Kafka; "
            "stop it or set LB_KAFKA_PORT"
        )
    for port, what, variable in (
        (config.kafka_controller_port, "controller", "LB_KAFKA_CONTROLLER_PORT"),
        (config.kafka_faults_port, "faults listener", "LB_KAFKA_FAULTS_PORT"),
    ):
        if ports.port_open(port):
            raise ServiceError(
                f"Kafka {what} port {port} is in use ({ports.port_owner(port)}); "
                f"stop it or set {variable}"
            )

    fetch_kafka_libs(config)
    _write_props(config)
    formatted = config.kafka_dir / "formatted-ports"
    ports_used = f"{config.kafka_port} {config.kafka_controller_port}"
    if formatted.is_file() and formatted.read_text().strip() != ports_used:
        log(
            f"WARNING: Kafka storage was formatted for ports {formatted.read_text().strip()}; "
            f"if it fails to start, delete {config.kafka_dir / 'data'}"
        )
    _format(config)

    log(f"starting Kafka {VERSION} (KRaft) on {HOST}:{config.kafka_port}")
    process = launch_broker(
        config,
        folder=config.kafka_dir,
        props=props_file(config),
        logs=config.kafka_logs,
        heap=["-Xms512m", "-Xmx1g"],
    )
    pid_file(config).write_text(f"{process.pid}\n")
    deadline = time.monotonic() + config.start_timeout
    while not answers(config):
        if process.poll() is not None:
            pid_file(config).unlink(missing_ok=True)
            show_log_tail(server_log)
            show_log_tail(config.kafka_logs / "kafka.out")
            raise ServiceError(
                f"Kafka exited during startup; see {server_log} and "
                f"{config.kafka_logs / 'kafka.out'}"
            )
        if time.monotonic() >= deadline:
            show_log_tail(server_log)
            raise ServiceError(
                f"Kafka did not answer a metadata request on {HOST}:{config.kafka_port} within "
                f"{config.start_timeout:.0f}s (pid {process.pid} still running); see {server_log}"
            )
        time.sleep(0.5)
    log(
        f"Kafka ready (pid {running_pid(config) or '?'}, "
        f"checked with the {config.kafka_checker} client)"
    )
    return False


def stop(config: Config) -> None:
    pid = running_pid(config)
    if pid is None:
        pid_file(config).unlink(missing_ok=True)
        log("Kafka not running")
        return
    log(f"stopping Kafka (pid {pid}; up to 30s for a controlled shutdown)")
    terminate(pid, "Kafka")
    pid_file(config).unlink(missing_ok=True)
