"""The LB_* variables: defaults, derived ports, empty-as-unset, and loud bad values."""

from __future__ import annotations

from pathlib import Path

import pytest

from devservices.config import Config, ConfigError

ROOT = Path("/repo")


def config(**env: str) -> Config:
    return Config.from_env(env, cwd=Path("/here"), root=ROOT)


def test_defaults_are_the_shared_services_ports() -> None:
    c = config()
    assert c.local_dir == ROOT / ".local"
    assert (c.pg_port, c.redis_port, c.kafka_port, c.kafka_controller_port) == (
        5432,
        6379,
        9092,
        9093,
    )
    assert (c.kafka_faults_port, c.kafka_faults_proxy_port) == (9094, 9095)
    assert c.redis_cluster_ports == (7000, 7001, 7002, 7003, 7004, 7005)
    assert c.kafka_cluster_bootstrap == "127.0.0.1:19092,127.0.0.1:19093,127.0.0.1:19094"
    assert c.kafka_cluster_voters == "1@127.0.0.1:19192,2@127.0.0.1:19193,3@127.0.0.1:19194"
    assert not c.redis_cluster
    assert not c.kafka_cluster
    assert c.start_timeout == 120


def test_faults_ports_follow_the_kafka_port_unless_set() -> None:
    assert (config(LB_KAFKA_PORT="29092").kafka_faults_port, 29094) == (29094, 29094)
    c = config(LB_KAFKA_PORT="29092")
    assert c.kafka_faults_proxy_port == 29095
    c = config(
        LB_KAFKA_PORT="29092", LB_KAFKA_FAULTS_PORT="1234", LB_KAFKA_FAULTS_PROXY_PORT="1235"
    )
    assert (c.kafka_faults_port, c.kafka_faults_proxy_port) == (1234, 1235)


def test_an_empty_variable_counts_as_unset() -> None:
    c = config(LB_PG_PORT="", LB_LOCAL_DIR="", LB_REDIS_MODE="", LB_KAFKA_BROKERS="")
    assert c.pg_port == 5432
    assert c.local_dir == ROOT / ".local"
    assert c.redis_mode == "single"
    assert c.kafka_brokers == 1


def test_a_relative_state_folder_is_made_absolute_from_the_current_directory() -> None:
    assert config(LB_LOCAL_DIR=".local-alt").local_dir == Path("/here/.local-alt")
    assert config(LB_LOCAL_DIR="/abs/x/../y").local_dir == Path("/abs/y")


def test_cluster_variables() -> None:
    c = config(
        LB_REDIS_MODE="Cluster",
        LB_KAFKA_BROKERS="3",
        LB_REDIS_CLUSTER_PORT="17000",
        LB_KAFKA_CLUSTER_PORT="39092",
        LB_KAFKA_CLUSTER_CONTROLLER_PORT="39192",
    )
    assert c.redis_cluster
    assert c.kafka_cluster
    assert c.redis_cluster_ports[-1] == 17005
    assert [c.kafka_node_port(n) for n in (1, 2, 3)] == [39092, 39093, 39094]
    assert c.kafka_node_controller_port(3) == 39194


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"LB_REDIS_MODE": "sharded"}, "LB_REDIS_MODE=sharded: use single or cluster"),
        ({"LB_KAFKA_BROKERS": "2"}, "LB_KAFKA_BROKERS=2: use 1 or 3"),
        ({"LB_PG_PORT": "54x"}, "LB_PG_PORT=54x is not a port number"),
        ({"LB_REDIS_CLUSTER_PORT": "70000"}, "LB_REDIS_CLUSTER_PORT=70000 is not a port number"),
        ({"LB_START_TIMEOUT": "soon"}, "LB_START_TIMEOUT=soon is not a number of seconds"),
        ({"LB_KAFKA_CHECKER": "ruby"}, "LB_KAFKA_CHECKER=ruby: use protocol or java"),
    ],
)
def test_a_bad_value_names_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config(**env)


def test_the_old_python_checker_means_the_built_in_client() -> None:
    assert config(LB_KAFKA_CHECKER="python").kafka_checker == "protocol"


def test_lock_files_keep_the_names_services_sh_used() -> None:
    c = config(TMPDIR="/t")
    assert c.lock_file == Path("/t/lb-services-5432-6379-9092.lock")
    assert c.cluster_lock_file == Path("/t/lb-services-clusters-7000-19092.lock")
