"""Reconciles run while the consumers are frozen between their PostgreSQL commit and their
Redis apply: no false drift, and every board exact once they resume."""

from __future__ import annotations

import random
import signal
import time
import uuid
from datetime import UTC

import pytest

from leaderboard import keys
from leaderboard.models import MatchResult
from leaderboard.services import board_reconcile
from tests.helpers import mark_intact
from tests.ingestion.ingest_helpers import committed_offsets, end_offsets, publish_results

from .fault_helpers import Outcome, Stream, consumer, make_stream, wait_exact

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

MEMBERS = 2
# Moments with results stored above a watermark, each reconciled in full: the loop stops once
# it has this many (and the stream is published), and the case needs at least MIN_FREEZES. Where
# a freeze lands is chance: the window between a batch's PostgreSQL commit and its Redis call
# is short on a quiet machine.
FREEZES = 6
MIN_FREEZES = 2
TRIES = 600


def _stored_above_watermarks(client, stream: Stream, topic: str) -> int:
    """Results stored in PostgreSQL that their board's watermark does not cover yet."""
    above = 0
    for board in stream.boards:
        watermark = client.hgetall(keys.ingest_applied_offsets(board_id=board.id, topic=topic))
        applied = {int(p): int(o) for p, o in watermark.items() if p.isdigit()}
        for partition in range(3):
            above += MatchResult.objects.filter(
                board_id=board.id,
                kafka_partition=partition,
                kafka_offset__gt=applied.get(partition, -1),
            ).count()
    return above


def test_reconciles_while_consumers_are_frozen_mid_batch(
    topic_and_dlq, board_redis, tmp_path, record
) -> None:
    stream = make_stream(count=8_000, players=1_000, seed=808)
    topic, dlq = topic_and_dlq("frozen", partitions=3)
    group = f"test-frozen-{uuid.uuid4().hex[:8]}"
    mark_intact(stream.season, topic=topic)
    members = [
        consumer(
            topic=topic,
            dlq=dlq,
            group=group,
            log=tmp_path / f"member{n}.log",
            instance=n,
            INGEST_MAX_POLL_RECORDS="300",
        )
        for n in range(MEMBERS)
    ]
    days = sorted({r.achieved_at.astimezone(UTC).date() for r in stream.distinct})
    rng = random.Random(5)
    chunks = stream.chunks(TRIES // 20)
    published = 0
    freezes = reconciles = false_drifts = 0

    def logs() -> str:
        return "\n".join(m.log_tail(20) for m in members)

    try:
        for member in members:
            member.start()
        for attempt in range(TRIES):
            if published < len(chunks) and attempt % 20 == 0:
                publish_results(topic, chunks[published])
                published += 1
            time.sleep(rng.random() * 0.03)  # jitter: where in a batch the freeze lands
            for member in members:
                assert member.proc is not None
                assert member.proc.poll() is None, logs()
                member.proc.send_signal(signal.SIGSTOP)
            try:
                if _stored_above_watermarks(board_redis, stream, topic) == 0:
                    continue
                freezes += 1
                for board in stream.boards:
                    for day in (None, *days):
                        result = board_reconcile(board_id=board.id, day=day, topic=topic)
                        reconciles += 1
                        false_drifts += result.drift_found
            finally:
                for member in members:
                    assert member.proc is not None
                    member.proc.send_signal(signal.SIGCONT)
            if freezes >= FREEZES and published == len(chunks):
                break
        while published < len(chunks):
            publish_results(topic, chunks[published])
            published += 1
        assert freezes >= MIN_FREEZES, f"only {freezes} freezes caught results above a watermark"
        resumed = time.monotonic()
        members[0].wait_for(
            lambda: committed_offsets(topic, group) == end_offsets(topic), timeout=90
        )
        exactness = wait_exact(
            board_redis, stream, since=resumed, timeout=60, stalled=20, context=logs
        )
        for member in members:
            member.stop()
    finally:
        for member in members:
            if member.proc is not None and member.proc.poll() is None:
                member.proc.send_signal(signal.SIGCONT)
            member.kill_if_running()
    assert false_drifts == 0, f"{false_drifts} of {reconciles} reconciles saw a false drift"
    record(
        Outcome.exact(
            "reconcile beside frozen consumers",
            f"{freezes} SIGSTOPs of both group members with results stored above a watermark, "
            f"each followed by a reconcile of every key (season-long and daily)",
            stream,
            exactness,
            note=f"{reconciles} reconciles, {false_drifts} drifts found",
        )
    )
