"""What the consumer commits after a batch, when a commit is given up, and how lag is summed."""

from __future__ import annotations

import logging
import threading
from types import SimpleNamespace

import pytest
from kafka.errors import (
    CommitFailedError,
    KafkaTimeoutError,
    NotCoordinatorError,
    RebalanceInProgressError,
)
from kafka.structs import TopicPartition

from ingestion.offsets import consumer_lag, next_offsets, offsets_commit, owed_offsets_commit
from ingestion.retrying import Backoff

A, B = TopicPartition("t", 0), TopicPartition("t", 1)


class FakeConsumer:
    """The slice of KafkaConsumer the offsets module uses, with scripted commit failures."""

    def __init__(
        self,
        *,
        failures: list[Exception] | None = None,
        highwater: dict[TopicPartition, int | None] | None = None,
    ) -> None:
        self.failures = list(failures or [])
        self.commits: list[dict[TopicPartition, int]] = []
        self._highwater = highwater or {}

    def commit(self, *, offsets, timeout_ms: int) -> None:
        if self.failures:
            raise self.failures.pop(0)
        self.commits.append({tp: meta.offset for tp, meta in offsets.items()})

    def assignment(self) -> set[TopicPartition]:
        return set(self._highwater)

    def highwater(self, tp: TopicPartition) -> int | None:
        return self._highwater[tp]


def _backoff() -> Backoff:
    return Backoff(stop=threading.Event(), max_delay=0.01)


def test_the_next_offsets_are_one_past_each_partitions_last_record() -> None:
    polled = {
        A: [SimpleNamespace(offset=5), SimpleNamespace(offset=9)],
        B: [SimpleNamespace(offset=0)],
    }
    assert next_offsets(polled) == {A: 10, B: 1}


def test_a_commit_waits_through_a_kafka_outage() -> None:
    consumer = FakeConsumer(failures=[KafkaTimeoutError("down"), KafkaTimeoutError("down")])

    assert offsets_commit(consumer=consumer, offsets={A: 10}, retrying=_backoff()) is True
    assert consumer.commits == [{A: 10}]


@pytest.mark.parametrize("refusal", [CommitFailedError("gen"), RebalanceInProgressError()])
def test_a_commit_refused_by_a_rebalance_is_skipped_not_retried(refusal, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="ingestion.offsets")
    consumer = FakeConsumer(failures=[refusal])

    assert offsets_commit(consumer=consumer, offsets={A: 10}, retrying=_backoff()) is False
    assert consumer.commits == []
    assert "offset commit skipped during a group rebalance" in caplog.text


def test_lag_sums_the_partitions_whose_position_and_high_watermark_are_known() -> None:
    consumer = FakeConsumer(highwater={A: 120, B: 7, TopicPartition("t", 2): None})

    assert consumer_lag(consumer=consumer, positions={0: 100, 1: 9, 2: 0}) == 20  # B: never < 0
    assert consumer_lag(consumer=consumer, positions={}) is None
    assert consumer_lag(consumer=FakeConsumer(), positions={0: 1}) is None


class RebalancedConsumer(FakeConsumer):
    """After a rebalance: ``owns`` the partitions it still has, ``committed`` the group's."""

    def __init__(self, *, owns: set[TopicPartition], committed: dict[TopicPartition, int]):
        super().__init__(highwater=dict.fromkeys(owns))
        self._committed = committed
        self.polls = 0

    def poll(self, *, timeout_ms: int, max_records: int) -> dict:
        self.polls += 1  # completes the rebalance; its records are left alone
        return {}

    def committed(self, tp: TopicPartition) -> int | None:
        return self._committed.get(tp)


def test_at_stop_the_offsets_a_rebalance_refused_are_committed_where_still_owned() -> None:
    C = TopicPartition("t", 2)
    consumer = RebalancedConsumer(owns={A, C}, committed={C: 50})

    done = owed_offsets_commit(consumer=consumer, owed={A: 10, B: 7, C: 40}, poll_timeout_ms=10)

    # A: still ours, committed behind; B: another member's now; C: already committed further.
    assert done == {A: 10}
    assert consumer.commits == [{A: 10}]
    assert consumer.polls == 1


def test_at_stop_a_rebalance_still_running_is_polled_again_until_the_commit_lands(caplog) -> None:
    # The coordinator moved while the group rebalanced: the first polls do not finish it.
    consumer = RebalancedConsumer(owns={A}, committed={})
    consumer.failures = [RebalanceInProgressError("joining"), NotCoordinatorError("moved")]

    done = owed_offsets_commit(consumer=consumer, owed={A: 10}, poll_timeout_ms=10)

    assert done == {A: 10}
    assert consumer.commits == [{A: 10}]
    assert consumer.polls == 3


def test_at_stop_nothing_owed_means_no_poll_and_a_failed_commit_commits_nothing(caplog) -> None:
    idle = RebalancedConsumer(owns={A}, committed={})
    assert owed_offsets_commit(consumer=idle, owed={}, poll_timeout_ms=10) == {}
    assert idle.polls == 0

    failing = RebalancedConsumer(owns={A}, committed={})
    failing.failures = [RebalanceInProgressError("again")] * 1_000_000
    with caplog.at_level(logging.WARNING):
        assert (
            owed_offsets_commit(
                consumer=failing, owed={A: 10}, poll_timeout_ms=10, within_seconds=0.05
            )
            == {}
        )
    assert failing.polls > 1
    assert "stay uncommitted" in caplog.text


def test_a_partition_given_away_loses_its_committed_position() -> None:
    """Committed by another member meanwhile, it would come back with the lag of everything
    that member applied (its old position is this member's last commit)."""
    from ingestion.consumer import MatchResultConsumer
    from ingestion.stats import IngestTotals

    consumer = MatchResultConsumer.__new__(MatchResultConsumer)
    consumer.totals = IngestTotals()
    consumer.totals.positions.update({0: 1_000, 1: 500})
    consumer._kafka = SimpleNamespace(lost=False)  # type: ignore[assignment]
    consumer.options = SimpleNamespace(topic="t")  # type: ignore[assignment]
    only_b = FakeConsumer(highwater={B: 600})
    assert consumer._observe_partitions(only_b) == 100
    assert consumer.totals.positions == {1: 500}
    # A back, not committed here since: its lag is unknown, not 49,000.
    back = FakeConsumer(highwater={A: 50_000, B: 600})
    assert consumer._observe_partitions(back) == 100
