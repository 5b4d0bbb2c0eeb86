"""The configuration files the services are started with, rendered from the settings (pure text
in, text out: the service modules write them, on every start, so a changed port takes effect)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from devservices.config import HOST
from devservices.errors import ServiceError

HEADER = "# Written by devservices on every start; do not edit."
_PLACEHOLDER = re.compile(r"@([A-Z0-9_]+)@")


def render_template(template: str, values: Mapping[str, object]) -> str:
    """Replace every ``@NAME@``; loud when the template asks for a value not given."""
    missing = sorted({m for m in _PLACEHOLDER.findall(template) if m not in values})
    if missing:
        raise ServiceError(f"template placeholders without a value: {', '.join(missing)}")
    return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), template)


def postgres_conf(*, port: int, socket_dir: Path) -> str:
    return f"""{HEADER}
listen_addresses = '{HOST}'
port = {port}
unix_socket_directories = '{socket_dir}'
max_connections = 200
shared_buffers = 256MB
# Durability settings (fsync, synchronous_commit, full_page_writes) stay at defaults.
log_min_duration_statement = -1
log_line_prefix = '%m [%p] %q%u@%d '
"""


POSTGRES_INCLUDE = "\n# project settings (devservices)\ninclude_if_exists = 'leaderboard.conf'\n"


def postgres_bootstrap_sql(*, user: str, password: str, database: str) -> str:
    """Role and database, idempotent. CREATEDB: the test runner creates its test databases."""
    return f"""DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{user}') THEN
    CREATE ROLE {user} LOGIN CREATEDB PASSWORD '{password}';
  ELSE
    ALTER ROLE {user} LOGIN CREATEDB PASSWORD '{password}';
  END IF;
END
$$;
SELECT 'CREATE DATABASE {database} OWNER {user}'
 WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '{database}')\\gexec
"""


def redis_conf(*, port: int, directory: Path) -> str:
    return f"""{HEADER}
bind {HOST}
port {port}
protected-mode yes
daemonize yes
pidfile "{directory / "redis.pid"}"
logfile "{directory / "redis.log"}"
dir "{directory}"
# Redis is rebuildable from PostgreSQL, but keep persistence in dev anyway.
appendonly yes
appendfsync everysec
save 3600 1 300 100 60 10000
"""


def redis_cluster_node_conf(*, port: int, directory: Path) -> str:
    return f"""{HEADER}
bind {HOST}
port {port}
protected-mode yes
daemonize yes
pidfile "{directory / "redis.pid"}"
logfile "{directory / "redis.log"}"
dir "{directory}"
cluster-enabled yes
cluster-config-file nodes.conf
# A master that does not answer for 2 s is failed over: a failover takes seconds.
cluster-node-timeout 2000
# 0: a replica is always eligible for promotion, however long it has been cut off from
# its master (the boards are rebuildable from PostgreSQL; availability first).
cluster-replica-validity-factor 0
cluster-require-full-coverage yes
appendonly yes
appendfsync everysec
save ""
"""


def kafka_single_values(
    *, port: int, controller_port: int, faults_port: int, faults_proxy_port: int, data_dir: Path
) -> dict[str, object]:
    """infra/kafka/server.properties.template's placeholders."""
    return {
        "KAFKA_PORT": port,
        "KAFKA_CONTROLLER_PORT": controller_port,
        "KAFKA_FAULTS_PORT": faults_port,
        "KAFKA_FAULTS_PROXY_PORT": faults_proxy_port,
        "KAFKA_DATA_DIR": data_dir,
    }


def kafka_node_values(
    *, node: int, port: int, controller_port: int, voters: str, data_dir: Path
) -> dict[str, object]:
    """infra/kafka/cluster-node.properties.template's placeholders."""
    return {
        "NODE_ID": node,
        "KAFKA_PORT": port,
        "KAFKA_CONTROLLER_PORT": controller_port,
        "KAFKA_VOTERS": voters,
        "KAFKA_DATA_DIR": data_dir,
    }
