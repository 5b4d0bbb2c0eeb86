"""What the handler's Backoff waits out and what it raises (a pure unit: the errors are made
by hand, as redis-py raises them)."""

from __future__ import annotations

import threading

import pytest
from redis.exceptions import (
    ClusterDownError,
    MasterDownError,
    RedisClusterException,
    ResponseError,
    SlotNotCoveredError,
)

from ingestion.retrying import Backoff


def _fails_once(exc: BaseException):
    raised: list[BaseException] = []

    def operation() -> str:
        if not raised:
            raised.append(exc)
            raise exc
        return "done"

    return operation


@pytest.mark.parametrize(
    "exc",
    [
        # The surviving masters while a dead one's replica is not yet promoted.
        ClusterDownError("The cluster is down"),
        MasterDownError("Link with MASTER is down and replica-serve-stale-data is set to 'no'."),
        SlotNotCoveredError("Slot 42 is not covered by the cluster."),
        RedisClusterException("All slots are not covered after query all startup_nodes."),
        RedisClusterException("Redis Cluster cannot be connected. Please provide at least..."),
        ResponseError("BUSY Redis is busy running a script."),
    ],
)
def test_a_cluster_failing_over_is_waited_out(exc: BaseException) -> None:
    backoff = Backoff(stop=threading.Event(), max_delay=0.01)
    assert backoff("Redis", _fails_once(exc)) == "done"


@pytest.mark.parametrize(
    "exc",
    [
        RedisClusterException("Keys in request don't hash to the same slot"),
        ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"),
        ValueError("a bug"),
    ],
)
def test_a_bug_is_raised_at_once(exc: BaseException) -> None:
    backoff = Backoff(stop=threading.Event(), max_delay=0.01)
    with pytest.raises(type(exc)):
        backoff("Redis", _fails_once(exc))
