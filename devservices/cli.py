"""``python3 -m devservices <command>``: the local services on loopback, state in LB_LOCAL_DIR.

  start                    install what is missing, start (or reuse), wait until each answers
  stop                     stop what this LB_LOCAL_DIR started (cluster nodes included)
  status                   one line per service; exit 0 if all answer, 3 otherwise
  stop-clusters            stop the cluster nodes only
  redis-cluster-kill PORT  SIGKILL the Redis cluster node on PORT
  redis-cluster-start PORT restart it; waits until it rejoined
  kafka-broker-kill N      SIGKILL Kafka cluster node N (1..3)
  kafka-broker-start N     restart it; waits until 3 brokers are registered
  install-prometheus       Debian's prometheus + promtool, when missing
  install-browser          Debian's chromium, when missing

The clusters: LB_REDIS_MODE=cluster and LB_KAFKA_BROKERS=3 make start also start a Redis
Cluster of 3 masters + 3 replicas and a 3-node KRaft Kafka; status reports a cluster when its
variable is set or one of its nodes runs. Every variable: devservices/config.py and .env.example.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence

from devservices import browser, commands, faults, prometheus
from devservices.config import Config
from devservices.errors import PREFIX, ServiceError, log

EXIT_FAILED = 1
EXIT_USAGE = 2


def _port(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"not a port: {text}")
    return int(text)


def _node(text: str) -> int:
    if text not in {"1", "2", "3"}:
        raise argparse.ArgumentTypeError(f"not a Kafka cluster node: '{text}' (1, 2 or 3)")
    return int(text)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python3 -m devservices",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="command")
    for name in (
        "start",
        "stop",
        "status",
        "stop-clusters",
        "install-prometheus",
        "install-browser",
    ):
        sub.add_parser(name)
    for name in ("redis-cluster-kill", "redis-cluster-start"):
        sub.add_parser(name).add_argument("port", type=_port)
    for name in ("kafka-broker-kill", "kafka-broker-start"):
        sub.add_parser(name).add_argument("node", type=_node)
    return p


def run(args: argparse.Namespace) -> int:
    command: str = args.command
    if command == "install-prometheus":
        prometheus.ensure_installed()
        return 0
    if command == "install-browser":
        browser.ensure_installed()
        return 0
    config = Config.from_env()
    if command == "start":
        started = time.monotonic()
        print(commands.start(config), flush=True)
        log(f"all services up ({time.monotonic() - started:.0f}s)")
        return 0
    if command == "stop":
        return 0 if commands.stop(config) else EXIT_FAILED
    if command == "stop-clusters":
        return 0 if commands.stop_clusters(config) else EXIT_FAILED
    if command == "status":
        lines, code = commands.status(config)
        print("\n".join(lines), flush=True)
        return code
    actions: dict[str, Callable[[int, Config], str]] = {
        "redis-cluster-kill": faults.redis_cluster_kill,
        "redis-cluster-start": faults.redis_cluster_start,
        "kafka-broker-kill": faults.kafka_broker_kill,
        "kafka-broker-start": faults.kafka_broker_start,
    }
    target = args.port if command.startswith("redis") else args.node
    print(actions[command](target, config), flush=True)
    return 0


def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    try:
        return run(args)
    except ServiceError as exc:
        print(f"{PREFIX} ERROR: {exc}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130
