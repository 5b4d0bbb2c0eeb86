"""Every LB_* variable the local services read, parsed and checked once, and the paths under the
state folder that follow from them.

An empty variable counts as unset (``.env.example`` lists them empty).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from devservices.errors import ServiceError

HOST = "127.0.0.1"
DB_NAME = "leaderboard"
DB_USER = "leaderboard"
DB_PASSWORD = "leaderboard"
REPO_ROOT = Path(__file__).resolve().parent.parent
REDIS_CLUSTER_SIZE = 6
KAFKA_CLUSTER_NODES = (1, 2, 3)
KAFKA_CHECKERS = ("protocol", "java")


class ConfigError(ServiceError):
    """An LB_* variable has a value the services cannot use."""


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "")
    return value if value != "" else None


def _port(env: Mapping[str, str], name: str, default: int) -> int:
    raw = _get(env, name)
    if raw is None:
        return default
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ConfigError(f"{name}={raw} is not a port number")
    return int(raw)


@dataclass(frozen=True)
class Config:
    root: Path
    local_dir: Path
    pg_port: int
    redis_port: int
    kafka_port: int
    kafka_controller_port: int
    kafka_faults_port: int
    kafka_faults_proxy_port: int
    start_timeout: float
    redis_mode: str
    redis_cluster_port: int
    kafka_brokers: int
    kafka_cluster_port: int
    kafka_cluster_controller_port: int
    kafka_checker: str
    pg_bin: Path | None
    lock_dir: Path

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        *,
        cwd: Path | None = None,
        root: Path = REPO_ROOT,
    ) -> Config:
        env = os.environ if env is None else env
        local = Path(_get(env, "LB_LOCAL_DIR") or root / ".local")
        # Absolute: the path ends up in configs and pid files.
        if not local.is_absolute():
            local = (cwd or Path.cwd()) / local
        kafka_port = _port(env, "LB_KAFKA_PORT", 9092)
        redis_mode = (_get(env, "LB_REDIS_MODE") or "single").strip().lower()
        if redis_mode not in {"single", "cluster"}:
            raise ConfigError(f"LB_REDIS_MODE={redis_mode}: use single or cluster")
        brokers = _get(env, "LB_KAFKA_BROKERS") or "1"
        if brokers not in {"1", "3"}:
            raise ConfigError(f"LB_KAFKA_BROKERS={brokers}: use 1 or 3")
        timeout = _get(env, "LB_START_TIMEOUT") or "120"
        if not timeout.isdigit() or int(timeout) == 0:
            raise ConfigError(f"LB_START_TIMEOUT={timeout} is not a number of seconds")
        # "python" was the venv's kafka-python; the built-in client needs no venv.
        checker = (_get(env, "LB_KAFKA_CHECKER") or "protocol").strip().lower()
        checker = "protocol" if checker == "python" else checker
        if checker not in KAFKA_CHECKERS:
            raise ConfigError(f"LB_KAFKA_CHECKER={checker}: use protocol or java")
        pg_bin = _get(env, "LB_PG_BIN")
        return cls(
            root=root,
            local_dir=Path(os.path.normpath(local)),
            pg_port=_port(env, "LB_PG_PORT", 5432),
            redis_port=_port(env, "LB_REDIS_PORT", 6379),
            kafka_port=kafka_port,
            kafka_controller_port=_port(env, "LB_KAFKA_CONTROLLER_PORT", 9093),
            kafka_faults_port=_port(env, "LB_KAFKA_FAULTS_PORT", kafka_port + 2),
            kafka_faults_proxy_port=_port(env, "LB_KAFKA_FAULTS_PROXY_PORT", kafka_port + 3),
            start_timeout=float(timeout),
            redis_mode=redis_mode,
            redis_cluster_port=_port(env, "LB_REDIS_CLUSTER_PORT", 7000),
            kafka_brokers=int(brokers),
            kafka_cluster_port=_port(env, "LB_KAFKA_CLUSTER_PORT", 19092),
            kafka_cluster_controller_port=_port(env, "LB_KAFKA_CLUSTER_CONTROLLER_PORT", 19192),
            kafka_checker=checker,
            pg_bin=Path(pg_bin) if pg_bin else None,
            lock_dir=Path(_get(env, "TMPDIR") or "/tmp"),  # noqa: S108 (lock files, by name)
        )

    # --- the single-node services -----------------------------------------------------------

    @property
    def pg_link(self) -> Path:
        """The cluster's folder: a real one, or a symlink to ~postgres/lb-<hash>."""
        return self.local_dir / "postgres"

    @property
    def redis_dir(self) -> Path:
        return self.local_dir / "redis"

    @property
    def kafka_dir(self) -> Path:
        return self.local_dir / "kafka"

    @property
    def kafka_libs(self) -> Path:
        return self.kafka_dir / "libs"

    @property
    def kafka_logs(self) -> Path:
        return self.kafka_dir / "logs"

    @property
    def infra_kafka(self) -> Path:
        return self.root / "infra" / "kafka"

    # --- the clusters -------------------------------------------------------------------------

    @property
    def redis_cluster(self) -> bool:
        return self.redis_mode == "cluster"

    @property
    def kafka_cluster(self) -> bool:
        return self.kafka_brokers == 3

    @property
    def redis_cluster_dir(self) -> Path:
        return self.local_dir / "redis-cluster"

    @property
    def redis_cluster_ports(self) -> tuple[int, ...]:
        return tuple(self.redis_cluster_port + i for i in range(REDIS_CLUSTER_SIZE))

    @property
    def kafka_cluster_dir(self) -> Path:
        return self.local_dir / "kafka-cluster"

    def kafka_node_port(self, node: int) -> int:
        return self.kafka_cluster_port + node - 1

    def kafka_node_controller_port(self, node: int) -> int:
        return self.kafka_cluster_controller_port + node - 1

    @property
    def kafka_cluster_bootstrap(self) -> str:
        return ",".join(f"{HOST}:{self.kafka_node_port(n)}" for n in KAFKA_CLUSTER_NODES)

    @property
    def kafka_cluster_voters(self) -> str:
        return ",".join(
            f"{n}@{HOST}:{self.kafka_node_controller_port(n)}" for n in KAFKA_CLUSTER_NODES
        )

    # --- locks ----------------------------------------------------------------------------------

    @property
    def lock_file(self) -> Path:
        """One start/stop at a time per set of ports; the name depends on the ports alone."""
        return (
            self.lock_dir / f"lb-services-{self.pg_port}-{self.redis_port}-{self.kafka_port}.lock"
        )

    @property
    def cluster_lock_file(self) -> Path:
        name = f"lb-services-clusters-{self.redis_cluster_port}-{self.kafka_cluster_port}.lock"
        return self.lock_dir / name
