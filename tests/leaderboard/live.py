"""Live ingestion as the rebuild protocol sees it: store a result, then apply it to Redis."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import redis
from django.conf import settings
from django.db import connection, transaction

from leaderboard.models import Board, MatchResult
from leaderboard.rank_events import KafkaRankEventSink, OutboxEntry
from leaderboard.selectors.boards import BoardRef
from leaderboard.services import CountedResult, board_results_apply, rank_events_publish
from seasons.models import Season
from tests.helpers import as_board

# A season stands for its main board in these helpers.
AnyBoard = Season | Board | BoardRef


def store(
    season: AnyBoard, *, player_id: int, points: int, at: datetime
) -> tuple[MatchResult, int]:
    """Insert one result in its own committed transaction; returns it and its xid."""
    board = as_board(season)
    with transaction.atomic():
        result = MatchResult.objects.create(
            match_id=uuid.uuid4(),
            season_id=board.season_id,
            board_id=board.id,
            player_id=player_id,
            points=points,
            achieved_at=at,
        )
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_current_xact_id()::text::bigint")
            row = cursor.fetchone()
    assert row is not None
    return result, int(row[0])


def apply(
    client: redis.Redis, season: AnyBoard, result: MatchResult, xid: int
) -> tuple[OutboxEntry, ...]:
    """Apply a stored result to its board (season-long and daily) with ingestion's own apply
    (the apply_results script, rebuild protocol included); the outbox entries of its rank
    events (not published)."""
    del client  # the service takes the boards' client itself
    board = as_board(season)
    return board_results_apply(
        # A topic of its own per call: its offset watermark never fences another call.
        topic=f"test-live-{uuid.uuid4().hex[:12]}",
        results=[
            CountedResult(
                partition=0,
                offset=0,
                board_id=board.id,
                player_id=result.player_id,
                points=result.points,
                ticks=board.codec.ticks(result.achieved_at - board.season.starts_at),
                day=result.achieved_at.astimezone(UTC).date(),
                xid=xid,
                match_id=result.match_id,
                at=int(result.achieved_at.timestamp()),
            )
        ],
        handled_offsets={0: 0},
        boards={board.id: board},
    ).events


def ingest(
    client: redis.Redis, season: AnyBoard, *, player_id: int, points: int, at: datetime
) -> MatchResult:
    result, xid = store(season, player_id=player_id, points=points, at=at)
    apply(client, season, result, xid)
    return result


def ingest_with_events(
    client: redis.Redis,
    season: AnyBoard,
    *,
    player_id: int,
    points: int,
    at: datetime,
    events_topic: str,
) -> MatchResult:
    """``ingest``, then its rank events published to ``events_topic`` (as the consumer does)."""
    result, xid = store(season, player_id=player_id, points=points, at=at)
    entries = apply(client, season, result, xid)
    sink = KafkaRankEventSink(
        bootstrap_servers=settings.KAFKA_BOOTSTRAP_SERVERS, topic=events_topic
    )
    rank_events_publish(entries=entries, sink=sink)
    sink.close()
    return result
