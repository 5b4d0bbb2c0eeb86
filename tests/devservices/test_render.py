"""Config rendering: every placeholder filled, a missing one loud, the real templates complete."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from devservices.config import REPO_ROOT
from devservices.errors import ServiceError
from devservices.render import (
    kafka_node_values,
    kafka_single_values,
    postgres_conf,
    redis_cluster_node_conf,
    redis_conf,
    render_template,
)

TEMPLATES = REPO_ROOT / "infra" / "kafka"


def test_render_template_replaces_every_placeholder() -> None:
    assert render_template("a=@A@ b=@B@ again=@A@", {"A": 1, "B": "x"}) == "a=1 b=x again=1"


def test_render_template_names_the_missing_placeholders() -> None:
    with pytest.raises(ServiceError, match="without a value: B, C"):
        render_template("@A@ @C@ @B@", {"A": 1})


def properties(text: str) -> dict[str, str]:
    return dict(
        line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#")
    )


def test_the_single_broker_template_renders_its_ports_and_folder() -> None:
    values = kafka_single_values(
        port=29092,
        controller_port=29093,
        faults_port=29094,
        faults_proxy_port=29095,
        data_dir=Path("/s/kafka/data"),
    )
    rendered = render_template((TEMPLATES / "server.properties.template").read_text(), values)
    assert not re.search(r"@[A-Z0-9_]+@", rendered)
    props = properties(rendered)
    assert props["listeners"] == (
        "PLAINTEXT://127.0.0.1:29092,CONTROLLER://127.0.0.1:29093,FAULTS://127.0.0.1:29094"
    )
    assert props["advertised.listeners"].endswith("FAULTS://127.0.0.1:29095")
    assert props["controller.quorum.bootstrap.servers"] == "127.0.0.1:29093"
    assert props["log.dirs"] == "/s/kafka/data"


def test_the_cluster_node_template_renders_its_node_and_voters() -> None:
    values = kafka_node_values(
        node=2,
        port=39093,
        controller_port=39193,
        voters="1@127.0.0.1:39192,2@127.0.0.1:39193,3@127.0.0.1:39194",
        data_dir=Path("/s/kafka-cluster/2/data"),
    )
    props = properties(
        render_template((TEMPLATES / "cluster-node.properties.template").read_text(), values)
    )
    assert props["node.id"] == "2"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:39093,CONTROLLER://127.0.0.1:39193"
    assert (
        props["controller.quorum.voters"] == "1@127.0.0.1:39192,2@127.0.0.1:39193,3@127.0.0.1:39194"
    )
    assert props["log.dirs"] == "/s/kafka-cluster/2/data"


def test_redis_confs_keep_their_state_in_the_given_folder() -> None:
    single = redis_conf(port=16379, directory=Path("/s/redis"))
    assert "port 16379\n" in single
    assert 'pidfile "/s/redis/redis.pid"' in single
    assert "cluster-enabled" not in single
    node = redis_cluster_node_conf(port=17003, directory=Path("/s/redis-cluster/17003"))
    assert "port 17003\n" in node
    assert "cluster-enabled yes" in node
    assert "cluster-node-timeout 2000" in node
    assert 'dir "/s/redis-cluster/17003"' in node


def test_postgres_conf_listens_on_loopback_at_the_port() -> None:
    conf = postgres_conf(port=15432, socket_dir=Path("/s/postgres/run"))
    assert "listen_addresses = '127.0.0.1'" in conf
    assert "port = 15432" in conf
    assert "unix_socket_directories = '/s/postgres/run'" in conf
