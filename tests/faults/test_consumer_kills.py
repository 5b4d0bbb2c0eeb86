"""Consumers SIGKILLed at random points while the stream flows, and group members killed and
replaced: every board and PostgreSQL end equal to the reference, nothing lost or doubled."""

from __future__ import annotations

import random
import signal
import time
import uuid
from functools import partial

import pytest

from leaderboard.models import MatchResult
from tests.helpers import wait_until
from tests.ingestion.ingest_helpers import (
    committed_offsets,
    end_offsets,
    publish_results,
    unique_results,
)

from .fault_helpers import Outcome, consumer, make_stream, wait_exact

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _rows() -> int:
    return MatchResult.objects.count()


def _rows_reach(target: int) -> bool:
    return _rows() >= target


def _done(topic: str, group: str) -> bool:
    return committed_offsets(topic, group) == end_offsets(topic)


KILLS = 22


def test_sigkill_at_random_points_during_the_stream(
    topic_and_dlq, board_redis, tmp_path, record
) -> None:
    stream = make_stream(count=11_000, players=1_500, seed=101)
    topic, dlq = topic_and_dlq("kill", partitions=3)
    group = f"test-kill-{uuid.uuid4().hex[:8]}"
    process = consumer(topic=topic, dlq=dlq, group=group, log=tmp_path / "consumer.log")
    rng = random.Random(7)
    published: set[uuid.UUID] = set()
    distinct_published = 0
    mid_ingest = 0
    # The stream arrives in one chunk per kill: every kill lands while messages are waiting.
    for chunk in stream.chunks(KILLS):
        publish_results(topic, chunk)
        for r in chunk:
            if (r.match_id, r.player_id) not in published:
                published.add((r.match_id, r.player_id))  # type: ignore[arg-type]
                distinct_published += 1
        stored_before = _rows()
        process.start()
        # A random point between the last kill's rows and what is published so far: anywhere
        # in a batch's PostgreSQL commit, Redis call or Kafka commit, given the jitter.
        target = rng.randint(stored_before + 1, max(stored_before + 1, distinct_published - 1))
        wait_until(partial(_rows_reach, target), timeout=60, every=0.005, context=process.log_tail)
        time.sleep(rng.random() * 0.05)  # jitter, not synchronisation
        assert process.signal(signal.SIGKILL) == -signal.SIGKILL
        if 0 < _rows() < len(stream.distinct):
            mid_ingest += 1
    assert mid_ingest >= 20, "the kills must land while results are being ingested"
    last_kill = time.monotonic()

    process.start()
    try:
        process.wait_for(lambda: _done(topic, group), timeout=90)
        exactness = wait_exact(
            board_redis, stream, since=last_kill, timeout=30, context=process.log_tail
        )
        process.stop()
    finally:
        process.kill_if_running()
    record(
        Outcome.exact(
            "consumer SIGKILL",
            f"{KILLS} SIGKILLs of the consumer at random points, each with new messages waiting",
            stream,
            exactness,
            note=f"{mid_ingest} of the kills mid-ingest",
        )
    )


MEMBERS = 3
MEMBER_KILLS = 8


def test_group_members_killed_and_replaced_mid_stream(
    topic_and_dlq, board_redis, tmp_path, record
) -> None:
    stream = make_stream(count=9_000, players=1_200, seed=404)
    topic, dlq = topic_and_dlq("members", partitions=4)
    group = f"test-members-{uuid.uuid4().hex[:8]}"
    members = [
        consumer(topic=topic, dlq=dlq, group=group, log=tmp_path / f"member{n}.log", instance=n)
        for n in range(MEMBERS)
    ]
    rng = random.Random(13)
    chunks = stream.chunks(MEMBER_KILLS + 1)
    published = publish_results(topic, chunks[0])

    def logs() -> str:
        return "\n".join(m.log_tail(20) for m in members)

    def published_distinct() -> int:
        return len(unique_results(stream.messages[:published]))

    mid_ingest = 0

    def all_alive() -> None:
        for n, m in enumerate(members):
            assert m.proc is not None
            assert m.proc.poll() is None, f"member {n} exited on its own ({m.proc.returncode})"

    try:
        for member in members:
            member.start()
        for chunk in chunks[1:]:
            published += publish_results(topic, chunk)
            # Kill one member while the group ingests, then replace it at once; a replacement
            # takes the dead member's static id, so its partitions come back without waiting
            # for the session to time out (as systemd's Restart= does, docs/operations.md).
            stored_before = _rows()
            target = min(stored_before + rng.randint(1, 300), published - len(chunk) // 2)
            wait_until(partial(_rows_reach, target), timeout=60, every=0.005, context=logs)
            all_alive()
            victim = members[rng.randrange(MEMBERS)]
            time.sleep(rng.random() * 0.05)  # jitter, not synchronisation
            assert victim.signal(signal.SIGKILL) == -signal.SIGKILL
            if _rows() < published_distinct():
                mid_ingest += 1
            victim.start()
        assert mid_ingest >= MEMBER_KILLS // 2, "most kills must land while the group ingests"
        last_kill = time.monotonic()
        exactness = wait_exact(
            board_redis,
            stream,
            since=last_kill,
            timeout=90,
            context=logs,
        )
        wait_until(lambda: _done(topic, group), timeout=30)
        for member in members:
            member.stop()
    finally:
        for member in members:
            member.kill_if_running()
    record(
        Outcome.exact(
            "group members",
            f"{MEMBER_KILLS} SIGKILLs of members of a {MEMBERS}-member group, each replaced",
            stream,
            exactness,
            note=f"{mid_ingest} of the kills with results still unstored",
        )
    )
