"""Rank events through consumer SIGKILLs between the Redis apply and the publish: every event the
reference expects reaches the rank-events topic, each id always with the same payload, none
with a new id; the boards stay exact."""

from __future__ import annotations

import json
import signal
import time
import uuid
from collections import defaultdict
from typing import Any

import pytest

from leaderboard import keys
from leaderboard.models import Board
from tests.helpers import wait_until
from tests.ingestion.ingest_helpers import committed_offsets, end_offsets, publish_results
from tests.ingestion.topic_reader import topic_read
from tests.leaderboard.rank_events_reference import EventsReference, RefResult

from .fault_helpers import Outcome, Stream, consumer, make_stream, wait_exact

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

KILLS = 12


def _reference(stream: Stream, topic: str) -> dict[str, dict[str, Any]]:
    """Every event of the stream, applied in topic order (one partition: offset = position)."""
    refs: dict[str, EventsReference] = {}
    for ref in stream.boards:
        board = Board.objects.get(pk=ref.id)
        refs[board.slug] = EventsReference(
            rule=board.rule,
            ascending=(board.order == "asc",),
            top_n=board.event_top_n,
            topic=topic,
            board_id=board.id,
            season_id=board.season_id,
            slug=board.slug,
        )
    seen: set[tuple[uuid.UUID, int, str]] = set()
    events: list[dict[str, Any]] = []
    starts_at = stream.season.starts_at
    for offset, r in enumerate(stream.messages):
        if (r.match_id, r.player_id, r.board) in seen:
            continue  # a game server's retry: stored once, counted once
        seen.add((r.match_id, r.player_id, r.board))
        events += refs[r.board].apply(
            RefResult(
                partition=0,
                offset=offset,
                player=r.player_id,
                values=(r.points,),
                ticks=int((r.achieved_at - starts_at).total_seconds()),
                match_id=str(r.match_id),
                at=int(r.achieved_at.timestamp()),
            )
        )
    return {e["eventId"]: e for e in events}


def test_sigkill_between_apply_and_publish_loses_no_event(
    topic_and_dlq, kafka_topic_factory, board_redis, tmp_path, record
) -> None:
    stream = make_stream(count=3_000, players=200, seed=2020)
    topic, dlq = topic_and_dlq("events-kill", partitions=1)
    events_topic = kafka_topic_factory("rank-events-kill", partitions=2)
    group = f"test-events-kill-{uuid.uuid4().hex[:8]}"
    process = consumer(
        topic=topic,
        dlq=dlq,
        group=group,
        log=tmp_path / "consumer.log",
        KAFKA_RANK_EVENTS_TOPIC=events_topic,
        INGEST_MAX_POLL_RECORDS="250",
    )
    outboxes = [
        keys.rank_events_outbox(board_id=ref.id, topic=topic, partition=0) for ref in stream.boards
    ]

    def outbox_entries() -> set[bytes]:
        return {entry_id for outbox in outboxes for entry_id, _ in board_redis.xrange(outbox)}

    left_over = 0
    for chunk in stream.chunks(KILLS):
        publish_results(topic, chunk)
        before = outbox_entries()
        process.start()
        # The moment an apply of this run has written its events to an outbox, and before the
        # consumer has published and trimmed them: the kill lands between the apply and the
        # publish (or just after the publish, before the trim: a duplicate, same id).
        wait_until(
            lambda: bool(outbox_entries() - before),  # noqa: B023 (used within the iteration)
            timeout=60,
            every=0.001,
            context=process.log_tail,
        )
        assert process.signal(signal.SIGKILL) == -signal.SIGKILL
        left_over += int(bool(outbox_entries() - before))
    assert left_over >= KILLS - 2, "the kills must land while this run's events wait"
    last_kill = time.monotonic()

    process.start()
    try:
        process.wait_for(lambda: committed_offsets(topic, group) == end_offsets(topic), timeout=90)
        exactness = wait_exact(
            board_redis, stream, since=last_kill, timeout=30, context=process.log_tail
        )
        process.stop()
    finally:
        process.kill_if_running()
    assert outbox_entries() == set()

    expected = _reference(stream, topic)
    payloads: dict[str, set[bytes]] = defaultdict(set)
    records = topic_read(events_topic)
    for r in records:
        payloads[json.loads(r.value)["eventId"]].add(r.value)
    # Every event, never an id the reference does not know, and one payload per id however
    # often the id was published.
    assert payloads.keys() == expected.keys()
    assert all(len(values) == 1 for values in payloads.values())
    assert {i: json.loads(next(iter(v))) for i, v in payloads.items()} == expected
    duplicates = len(records) - len(expected)
    record(
        Outcome.exact(
            "rank events through SIGKILLs",
            f"{KILLS} SIGKILLs of the consumer, each as soon as an apply wrote its events "
            "and before they were trimmed",
            stream,
            exactness,
            note=f"{len(expected)} events, none lost; {left_over} kills left events in an "
            f"outbox; {duplicates} published twice (same id and payload)",
        )
    )
