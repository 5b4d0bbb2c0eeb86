"""Rank events through ingestion: published before the batch returns (so before its offsets are
committed), kept in the outbox when the publish fails, published again by the redelivery with
the same ids, and nothing new on a replay; through the real consumer and Kafka."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from ingestion.consumer import MatchResultConsumer
from ingestion.records import ConsumedRecord
from ingestion.services import match_results_ingest
from leaderboard import keys
from leaderboard.models import Board, ScoringRule
from leaderboard.selectors.events import rank_events_outbox_read
from leaderboard.services import player_ban
from seasons.models import SeasonStatus
from tests.helpers import make_season
from tests.leaderboard.rank_events_reference import EventsReference, RefResult

from .ingest_helpers import LetterSink, Result, consumer_options, publish_results, seeded_results
from .topic_reader import topic_read

pytestmark = pytest.mark.django_db(transaction=True)

TOPIC = "events-ingest-test"


class ListSink:
    """Rank events kept in memory; ``fail`` makes the next publish raise (Kafka away)."""

    def __init__(self, *, fail: bool = False) -> None:
        self.messages: list[tuple[bytes, bytes]] = []
        self.fail = fail

    def publish(self, *, messages: Sequence[tuple[bytes, bytes]]) -> None:
        if self.fail:
            raise ConnectionError("Kafka is away")
        self.messages += messages

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(value) for _, value in self.messages]


def _reference(board: Board, topic: str, results: list[Result]) -> list[dict[str, Any]]:
    """The events of ``results`` applied in order, as partition 0 offsets 0.. (one partition)."""
    ref = EventsReference(
        rule=board.rule,
        ascending=(board.order == "asc",),
        top_n=board.event_top_n,
        topic=topic,
        board_id=board.id,
        season_id=board.season_id,
        slug=board.slug,
    )
    events: list[dict[str, Any]] = []
    for offset, r in enumerate(results):
        events += ref.apply(
            RefResult(
                partition=0,
                offset=offset,
                player=r.player_id,
                values=(r.points,),
                ticks=int((r.achieved_at - board.season.starts_at).total_seconds()),
                match_id=str(r.match_id),
                at=int(r.achieved_at.timestamp()),
            )
        )
    return events


def _ids(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["eventId"]: e for e in events}


def test_a_failed_publish_keeps_the_events_for_the_redelivery(board_redis) -> None:
    season = make_season(rule=ScoringRule.BEST, status=SeasonStatus.ACTIVE)
    board = Board.objects.get(season=season, slug="main")
    board.event_top_n = 3
    board.save()
    results = seeded_results(season, 30, players=8, seed=3)
    records = [ConsumedRecord(0, o, r.key(), r.value()) for o, r in enumerate(results)]

    # Kafka refuses the events: the batch does not return, so its offsets are not committed;
    # the board and the outbox hold what the apply wrote.
    with pytest.raises(ConnectionError):
        match_results_ingest(
            topic=TOPIC, records=records, dead_letters=LetterSink(), rank_events=ListSink(fail=True)
        )
    outbox = keys.rank_events_outbox(board_id=board.id, topic=TOPIC, partition=0)
    assert rank_events_outbox_read(outboxes=[outbox])

    # The redelivery: covered by the watermark, nothing applied again, the events published.
    sink = ListSink()
    outcome = match_results_ingest(
        topic=TOPIC, records=records, dead_letters=LetterSink(), rank_events=sink
    )
    assert (outcome.applied, outcome.duplicates) == (0, 30)
    assert outcome.rank_events == len(sink.messages)
    expected = _reference(board, TOPIC, results)
    assert _ids(sink.events()) == _ids(expected)
    assert all(
        key == str(e["playerId"]).encode()
        for (key, _), e in zip(sink.messages, sink.events(), strict=True)
    )
    assert rank_events_outbox_read(outboxes=[outbox]) == []

    # Another redelivery: nothing left, nothing new.
    again = ListSink()
    match_results_ingest(topic=TOPIC, records=records, dead_letters=LetterSink(), rank_events=again)
    assert again.messages == []


def test_events_left_by_a_crash_go_out_though_the_redelivery_has_nothing_to_apply(
    board_redis,
) -> None:
    # Every result of the batch is one player's, banned between the crash and the redelivery:
    # the redelivery makes no apply call for the board, and still owes that attempt's events
    # (rank changes of the player and of those they passed, already on the board).
    season = make_season(rule=ScoringRule.BEST, status=SeasonStatus.ACTIVE)
    board = Board.objects.get(season=season, slug="main")
    results = seeded_results(season, 6, players=1, seed=4)
    records = [ConsumedRecord(0, o, r.key(), r.value()) for o, r in enumerate(results)]
    with pytest.raises(ConnectionError):
        match_results_ingest(
            topic=TOPIC, records=records, dead_letters=LetterSink(), rank_events=ListSink(fail=True)
        )
    player_ban(season_id=season.id, player_id=results[0].player_id, reason="cheating")

    sink = ListSink()
    outcome = match_results_ingest(
        topic=TOPIC, records=records, dead_letters=LetterSink(), rank_events=sink
    )
    assert (outcome.applied, outcome.not_counted) == (0, 6)
    assert _ids(sink.events()) == _ids(_reference(board, TOPIC, results))
    outbox = keys.rank_events_outbox(board_id=board.id, topic=TOPIC, partition=0)
    assert rank_events_outbox_read(outboxes=[outbox]) == []


def test_events_through_the_consumer_and_kafka_and_none_new_on_a_replay(
    topic_and_dlq, kafka_topic_factory, board_redis
) -> None:
    season = make_season(rule=ScoringRule.CUMULATIVE, status=SeasonStatus.ACTIVE)
    board = Board.objects.get(season=season, slug="main")
    board.event_top_n = 5
    board.save()
    topic, dlq = topic_and_dlq("events", partitions=1)
    events_topic = kafka_topic_factory("rank-events", partitions=2)
    results = seeded_results(season, 300, players=40, seed=11)
    publish_results(topic, results)
    options = consumer_options(
        topic=topic, dead_letter_topic=dlq, max_poll_records=50, rank_events_topic=events_topic
    )
    totals = MatchResultConsumer(options).run(
        until=lambda t: t.records >= len(results), max_seconds=90
    )
    assert totals.applied == len(results)
    assert totals.rank_events > len(results)  # cumulative: a personal_best each, and more

    expected = _ids(_reference(board, topic, results))
    records = topic_read(events_topic)
    published = [json.loads(r.value) for r in records]
    assert _ids(published) == expected
    assert len(published) == len(expected)  # no crash: each exactly once
    # Keyed by player: one player's events on one partition, in the order they happened.
    for record, event in zip(records, published, strict=True):
        assert record.key == str(event["playerId"]).encode()
    by_player: dict[int, set[int]] = {}
    for record, event in zip(records, published, strict=True):
        by_player.setdefault(event["playerId"], set()).add(record.partition)
    assert all(len(partitions) == 1 for partitions in by_player.values())

    # A new group replays the topic from offset 0: the watermark covers every result, and the
    # outbox is empty: no event with a new id (none at all).
    replay = replace(options, group_id=f"{options.group_id}-replay")
    replayed = MatchResultConsumer(replay).run(
        until=lambda t: t.records >= len(results), max_seconds=90
    )
    assert (replayed.applied, replayed.rank_events) == (0, 0)
    assert len(topic_read(events_topic)) == len(published)
