"""The three settings modules, each loaded in a fresh process from a clean environment:
production carries no test or local-cluster wiring; local_clusters turns the LB_* variables
into the local services' addresses; settings_test adds the suite's own options."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_SHOW = """
import json
from django.conf import settings as s
print(json.dumps({
    "redis_nodes": s.REDIS_CLUSTER_NODES,
    "kafka": s.KAFKA_BOOTSTRAP_SERVERS,
    "replication": [s.KAFKA_TOPIC_REPLICATION_FACTOR, s.KAFKA_TOPIC_MIN_INSYNC_REPLICAS],
    "test_db": s.DATABASES["default"].get("TEST", {}).get("NAME"),
    "hosts": s.ALLOWED_HOSTS,
    "faults_proxy": getattr(s, "KAFKA_FAULTS_PROXY", None),
    "kafka_brokers": getattr(s, "LB_KAFKA_BROKERS", None),
}))
"""
# What the suite's own process may have exported (pytest-django's module name, the cluster
# pass's addresses): each case starts from none of it.
_CLEARED = ("DJANGO_", "LB_", "REDIS_CLUSTER_NODES", "KAFKA_")


def _settings(module: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(_CLEARED)}
    return subprocess.run(
        [sys.executable, "-c", _SHOW],
        cwd=ROOT,
        env=base | {"DJANGO_SETTINGS_MODULE": module, "DJANGO_DEBUG": "true"} | env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _shown(module: str, **env: str) -> dict:
    done = _settings(module, **env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_production_settings_carry_no_test_or_local_cluster_wiring() -> None:
    shown = _shown(
        "leaderboard_project.settings",
        DJANGO_TEST_DATABASE_NAME="test_elsewhere",
        LB_KAFKA_BROKERS="3",
    )
    assert shown == {
        "redis_nodes": [],
        "kafka": ["127.0.0.1:9092"],
        "replication": [1, 1],
        "test_db": None,
        "hosts": ["localhost", "127.0.0.1", "[::1]"],
        "faults_proxy": None,
        "kafka_brokers": None,
    }


def test_production_settings_need_the_cluster_nodes_named() -> None:
    done = _settings("leaderboard_project.settings", LB_REDIS_MODE="cluster")
    assert done.returncode != 0
    assert "LB_REDIS_MODE=cluster needs REDIS_CLUSTER_NODES" in done.stderr
    shown = _shown(
        "leaderboard_project.settings",
        LB_REDIS_MODE="cluster",
        REDIS_CLUSTER_NODES="redis-a:6379,redis-b:6379",
    )
    assert shown["redis_nodes"] == ["redis-a:6379", "redis-b:6379"]


def test_local_clusters_default_to_the_local_services() -> None:
    shown = _shown("leaderboard_project.local_clusters")
    assert (shown["redis_nodes"], shown["kafka"], shown["replication"]) == (
        [],
        ["127.0.0.1:9092"],
        [1, 1],
    )
    shown = _shown(
        "leaderboard_project.local_clusters",
        LB_REDIS_MODE="cluster",
        LB_KAFKA_BROKERS="3",
        LB_REDIS_CLUSTER_PORT="7100",
        LB_KAFKA_CLUSTER_PORT="19200",
    )
    assert shown["redis_nodes"] == [f"127.0.0.1:{7100 + i}" for i in range(6)]
    assert shown["kafka"] == ["127.0.0.1:19200", "127.0.0.1:19201", "127.0.0.1:19202"]
    assert shown["replication"] == [3, 2]
    assert shown["kafka_brokers"] == 3
    assert shown["test_db"] is None


def test_local_clusters_keep_what_is_set() -> None:
    shown = _shown(
        "leaderboard_project.local_clusters",
        LB_KAFKA_BROKERS="3",
        KAFKA_BOOTSTRAP_SERVERS="kafka-a:9092",
        KAFKA_TOPIC_MIN_INSYNC_REPLICAS="3",
        # Empty counts as unset, as for every variable.
        KAFKA_TOPIC_REPLICATION_FACTOR="",
    )
    assert shown["kafka"] == ["kafka-a:9092"]
    assert shown["replication"] == [3, 3]
    done = _settings("leaderboard_project.local_clusters", LB_KAFKA_BROKERS="2")
    assert done.returncode != 0
    assert "LB_KAFKA_BROKERS=2: use 1 or 3" in done.stderr


def test_test_settings_add_the_suites_options() -> None:
    shown = _shown("leaderboard_project.settings_test", DJANGO_TEST_DATABASE_NAME="test_mine")
    assert shown["test_db"] == "test_mine"
    assert shown["hosts"][-1] == "testserver"
    assert shown["faults_proxy"] == "127.0.0.1:9095"
    assert shown["kafka_brokers"] == 1
    assert _shown("leaderboard_project.settings_test")["test_db"] is None
