"""A group of three consumer processes over twelve partitions loses a member and gains one.

Three ``consume_match_results`` processes share one group (each its own static membership id)
over a twelve-partition topic on the three-broker Kafka. While results stream in, with a burst on
top, one member is SIGKILLed mid-batch and a fourth is started: the group rebalances (the
newcomer's join at once, the dead member's partitions once its session expires). Whatever the
dead member had stored but not committed is delivered again to whoever takes its partitions;
the per-board watermark and PostgreSQL's unique key must keep it from counting twice. Checked
against a reference computed here from every acknowledged result: boards (the rule is
cumulative, so a double count changes a sum) and PostgreSQL's row count exact.
"""

from __future__ import annotations

import random
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient

from leaderboard import keys
from leaderboard.models import MatchResult, ScoringRule
from leaderboard.redis import get_board_redis
from seasons.models import SeasonStatus
from tests.helpers import board_read, expected_board, main_board_id, make_season, wait_until
from tests.infra.clusters import (
    partitions_of,
    wait_for,
)
from tests.infra.test_kafka_broker_death_ingest import (
    Streams,
    _result,
    on_kafka_cluster,  # noqa: F401  (the fixture)
)
from tests.ingestion.ingest_helpers import (
    ConsumerProcess,
    assert_boards_match,
    committed_offsets,
    publish_results,
)

pytestmark = [pytest.mark.clusters, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PARTITIONS = 12
BACKLOG = 30_000
# kafka-python's default session.timeout.ms is 10 s: the dead member's partitions wait that
# long before the coordinator hands them on; the rest is start-up and catch-up on two cores.
REBALANCED_WITHIN_SECONDS = 90.0
EXACT_WITHIN_SECONDS = 120.0


def _group(admin: KafkaAdminClient, group: str) -> dict[str, Any]:
    return dict(admin.describe_groups([group])[group])


def _assigned(member: dict[str, Any]) -> set[int]:
    assignment = member.get("member_assignment") or {}
    return {p for tp in assignment.get("assigned_partitions", ()) for p in tp["partitions"]}


def _stable_with(admin: KafkaAdminClient, group: str, instances: set[str]) -> bool:
    """The group is stable with exactly these static members, every one holding partitions."""
    described = _group(admin, group)
    members = described.get("members") or []
    return (
        described.get("group_state") == "Stable"
        and {m["group_instance_id"] for m in members} == instances
        and all(_assigned(m) for m in members)
    )


def _partitions_of_member(admin: KafkaAdminClient, group: str, instance: str) -> set[int]:
    members = _group(admin, group).get("members") or []
    return next(_assigned(m) for m in members if m["group_instance_id"] == instance)


def _uncommitted_stored(board_id: int, committed: dict[int, int | None]) -> int:
    """Rows stored in PostgreSQL at or past the group's committed offset of their partition:
    what the group will deliver again."""
    return sum(
        MatchResult.objects.filter(
            board_id=board_id, kafka_partition=partition, kafka_offset__gte=offset or 0
        ).count()
        for partition, offset in committed.items()
    )


def _kill_holding_uncommitted_work(
    victim: ConsumerProcess, board_id: int, partitions: set[int], *, topic: str, group: str
) -> int:
    """SIGKILL ``victim`` at a moment it has stored results it has not committed yet, so that
    the group must deliver them again; how many.

    Freeze it (SIGSTOP) to look: kill if the moment is right, let it go on a little otherwise.
    A blind kill mostly lands between batches, where there is nothing to deliver again.
    """
    assert victim.proc is not None
    rng = random.Random(1)
    deadline = time.monotonic() + 60
    while True:
        victim.proc.send_signal(signal.SIGSTOP)
        committed = committed_offsets(topic, group)
        pending = _uncommitted_stored(board_id, {p: committed[p] for p in partitions})
        if pending:
            assert victim.signal(signal.SIGKILL) == -signal.SIGKILL
            return pending
        victim.proc.send_signal(signal.SIGCONT)
        assert time.monotonic() < deadline, (
            "never caught the member between storing and committing; " + victim.log_tail()
        )
        time.sleep(rng.random() * 0.2)


@pytest.mark.usefixtures("on_kafka_cluster")
def test_group_of_three_loses_a_member_and_gains_one_mid_stream_boards_exact(
    kafka_cluster_up: KafkaAdminClient,
    topic_and_dlq,
    tmp_path: Path,
) -> None:
    admin = kafka_cluster_up
    season = make_season(rule=ScoringRule.CUMULATIVE, status=SeasonStatus.ACTIVE)
    board_id = main_board_id(season.id)
    topic, dlq = topic_and_dlq("group-rebalance", partitions=PARTITIONS)
    wait_for(
        f"{PARTITIONS} partitions in the metadata",
        lambda: len(partitions_of(admin, topic)) == PARTITIONS,
        30,
    )
    group = f"group-rebalance-{uuid.uuid4().hex[:8]}"
    client = get_board_redis()

    rng = random.Random(12)
    backlog = [_result(season, rng) for _ in range(BACKLOG)]

    def member(n: int) -> ConsumerProcess:
        return ConsumerProcess(
            topic=topic, dlq=dlq, group=group, log=tmp_path / f"member-{n}.log", instance=n
        )

    members = {n: member(n) for n in range(3)}

    def logs() -> str:
        return "\n".join(f"member {n}: {m.log_tail(20)}" for n, m in members.items())

    def stored() -> int:
        return MatchResult.objects.filter(board_id=board_id).count()

    # Every member process ends with the test, whatever fails.
    try:
        streams = Streams(season, topic)
        try:
            for m in members.values():
                m.start()
            streams.start()
            # Kill once all three share the work and a burst is under way.
            wait_until(
                lambda: _stable_with(admin, group, {f"{group}-{n}" for n in range(3)}),
                timeout=REBALANCED_WITHIN_SECONDS,
                every=0.2,
                context=logs,
            )
            # A burst on top of the stream: the members work in full batches when one dies.
            before_burst = stored()
            publish_results(topic, backlog)
            wait_until(
                lambda: stored() >= before_burst + 1000, timeout=120, every=0.02, context=logs
            )
            victim_partitions = _partitions_of_member(admin, group, f"{group}-1")
            uncommitted_at_kill = _kill_holding_uncommitted_work(
                members[1], board_id, victim_partitions, topic=topic, group=group
            )
            members[3] = member(3)
            members[3].start()

            # The group settles on the three live members and goes on storing.
            wait_until(
                lambda: _stable_with(admin, group, {f"{group}-{n}" for n in (0, 2, 3)}),
                timeout=REBALANCED_WITHIN_SECONDS,
                every=0.2,
                context=logs,
            )
            after_rebalance = stored()
            wait_until(
                lambda: stored() >= after_rebalance + 500, timeout=60, every=0.1, context=logs
            )
        finally:
            streams.finish()

        assert not streams.errors, streams.errors[:3]
        reference = backlog + streams.acked()
        expected = expected_board(season, reference)

        def exact() -> bool:
            on_board = board_read(client, keys.board(board_id=board_id))
            return stored() == len(reference) and on_board == expected

        wait_until(exact, timeout=EXACT_WITHIN_SECONDS, every=0.2, context=logs)
        assert_boards_match(client, season, reference)  # the daily boards too
        assert stored() == len(reference)
        for n in (0, 2, 3):
            proc = members[n].proc
            assert proc is not None
            assert proc.poll() is None, members[n].log_tail()
        # Each live member stops cleanly once the group has committed to the end.
        members[0].drain_then_stop(topic=topic, group=group, timeout=60)
        for n in (2, 3):
            assert members[n].signal(signal.SIGTERM) == 0, members[n].log_tail()
    finally:
        for m in members.values():
            m.kill_if_running()
    print(
        f"\n{len(reference)} results; {uncommitted_at_kill} stored but uncommitted on partitions "
        f"{sorted(victim_partitions)} when member 1 was killed (delivered again, counted once)"
    )
