"""Reads on seasons.

The read API resolves a season on every request; ``season_get_cached`` keeps a short-lived
per-process memo so the hot endpoints make no SQL query once a season is known. A season's
codec split never changes, and its dates and status only matter to the read path at the
scale of the memo's few seconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from django.conf import settings
from django.db.models import QuerySet
from kafka import KafkaConsumer, TopicPartition

from ingestion.selectors import board_scores_top
from leaderboard import keys
from leaderboard.codec import ScoreCodec
from leaderboard.redis import get_board_redis

from .models import FinalStanding, Season, SeasonStatus

if TYPE_CHECKING:
    from leaderboard.selectors import RankingEntry

# Bounds the memo against clients probing random season ids (each miss is memoized too).
_MEMO_MAX_ENTRIES = 10_000


@dataclass(frozen=True, slots=True)
class SeasonRef:
    """What the read path needs of a season, detached from the ORM."""

    id: int
    name: str
    status: str
    rule: str
    starts_at: datetime
    ends_at: datetime
    codec: ScoreCodec

    @classmethod
    def from_model(cls, season: Season) -> SeasonRef:
        return cls(
            id=season.id,
            name=season.name,
            status=season.status,
            rule=season.rule,
            starts_at=season.starts_at,
            ends_at=season.ends_at,
            codec=season.codec,
        )


_memo: dict[int, tuple[float, SeasonRef | None]] = {}
_memo_lock = threading.Lock()


def season_get_cached(*, season_id: int) -> SeasonRef | None:
    """The season, or None if it does not exist; memoized for LEADERBOARD_SEASON_CACHE_SECONDS.

    Misses are memoized as well: a client asking for an unknown season in a loop must not
    turn into one SQL query per request.
    """
    now = time.monotonic()
    hit = _memo.get(season_id)
    if hit is not None and hit[0] > now:
        return hit[1]
    season = Season.objects.filter(id=season_id).first()
    ref = SeasonRef.from_model(season) if season is not None else None
    with _memo_lock:
        if len(_memo) >= _MEMO_MAX_ENTRIES:
            _memo.clear()
        _memo[season_id] = (now + settings.LEADERBOARD_SEASON_CACHE_SECONDS, ref)
    return ref


def season_cache_clear() -> None:
    """Forget every memoized season (tests; a process that must see a change at once)."""
    with _memo_lock:
        _memo.clear()


def season_list() -> QuerySet[Season]:
    """Every season, the most recent start first."""
    return Season.objects.order_by("-starts_at", "-id")


def season_list_active(*, include_closing: bool = False) -> list[Season]:
    """Seasons taking results now (status kept in step with the dates by season_statuses_sync).

    ``include_closing`` adds the seasons that stopped taking results but whose close-out has not
    finished: their boards still change while the consumer drains.
    """
    statuses = [SeasonStatus.ACTIVE]
    if include_closing:
        statuses.append(SeasonStatus.CLOSING)
    return list(Season.objects.filter(status__in=statuses).order_by("id"))


@dataclass(frozen=True)
class StandingRow:
    rank: int
    player_id: int
    points: int
    reached_at: datetime


def season_standings_compute(*, season: Season, limit: int) -> list[StandingRow]:
    """The season's top ``limit`` from PostgreSQL (the aggregation a rebuild loads), never from
    Redis, which may have lost writes. Ranks follow the board: encoded score, then the lower
    player id for an exact tie, so ranks are distinct and reproducible."""
    codec = season.codec
    return [
        StandingRow(
            rank=index,
            player_id=score.player_id,
            points=score.points,
            # What the board shows: the start of the tick the score is credited to.
            reached_at=season.starts_at + codec.decode(score.score).elapsed,
        )
        for index, score in enumerate(board_scores_top(season=season, limit=limit), start=1)
    ]


class SeasonNotFinal(Exception):
    """The season is unknown or not closed: it has no final standings (yet)."""


def season_final_standings_list(*, season_id: int, limit: int) -> list[FinalStanding]:
    """A closed season's final entries, best first; SeasonNotFinal says why there are none."""
    season = Season.objects.filter(id=season_id).only("id", "status").first()
    if season is None:
        raise SeasonNotFinal(f"season {season_id} does not exist")
    if season.status != SeasonStatus.CLOSED:
        raise SeasonNotFinal(
            f"season {season_id} is {season.status}; final standings exist once it is closed"
        )
    return list(FinalStanding.objects.filter(season_id=season_id).order_by("rank")[:limit])


@dataclass(frozen=True)
class BoardOverview:
    size: int
    top: list[RankingEntry]
    snapshot_refreshed_at: datetime | None


def season_board_overview_get(*, season: Season, limit: int = 100) -> BoardOverview:
    """What staff see of a live board: its size, its top ``limit`` as the API ranks it, and when
    the top-list snapshot was last refreshed (read from Redis, not from this process's memo)."""
    # Imported here: leaderboard.selectors builds on this module's SeasonRef.
    from leaderboard.selectors import board_ranks_get, top_snapshot_decode

    client = get_board_redis()
    size = int(client.zcard(keys.season_board(season_id=season.id)))
    top = board_ranks_get(season=SeasonRef.from_model(season), start_rank=1, count=limit)
    raw = client.get(keys.top_snapshot(season_id=season.id))
    snapshot = None if raw is None else top_snapshot_decode(raw=raw, season_id=season.id)
    refreshed = None if snapshot is None else datetime.fromtimestamp(snapshot.generated_at, UTC)
    return BoardOverview(size=size, top=top, snapshot_refreshed_at=refreshed)


# --- Close-out: has the consumer drained the match-results topic? --------------------------------


@dataclass(frozen=True, slots=True)
class PartitionLag:
    """A partition whose results below ``end_offset`` are not all handled yet."""

    partition: int
    end_offset: int  # recorded when the close-out began waiting
    committed: int | None  # the consumer group's next offset to read; None: never committed

    def describe(self) -> str:
        at = "nothing committed" if self.committed is None else f"committed {self.committed}"
        behind = self.end_offset - (self.committed or 0)
        return f"partition {self.partition} ({at}, needs {self.end_offset}: {behind} behind)"


@contextmanager
def kafka_offsets_reader(*, group_id: str | None = None) -> Iterator[KafkaConsumer]:
    """A consumer that only reads offsets: it never subscribes, joins or commits."""
    consumer = KafkaConsumer(
        bootstrap_servers=list(settings.KAFKA_BOOTSTRAP_SERVERS),
        group_id=group_id,
        client_id="season-close-drain",
        enable_auto_commit=False,
        request_timeout_ms=10_000,
        # Kafka down: say so within seconds (the close-out then finalizes nothing) rather than
        # hold a worker for the default 30 s.
        bootstrap_timeout_ms=5_000,
    )
    try:
        yield consumer
    finally:
        consumer.close(autocommit=False)


def topic_end_offsets_get(*, topic: str) -> dict[int, int]:
    """Each partition's end offset (the offset the next message will get); {} for no topic."""
    with kafka_offsets_reader() as reader:
        partitions = [
            TopicPartition(topic, p) for p in sorted(reader.partitions_for_topic(topic) or ())
        ]
        ends = reader.end_offsets(partitions) if partitions else {}
    return {tp.partition: int(offset) for tp, offset in ends.items()}


def consumer_group_lag_get(
    *, reader: KafkaConsumer, topic: str, end_offsets: Mapping[int, int]
) -> list[PartitionLag]:
    """The partitions where ``reader``'s group has not committed up to ``end_offsets``.

    The consumer commits a batch only after PostgreSQL stored it, the boards hold it and its
    dead letters are acknowledged (ingestion/consumer.py), so a committed offset >= the recorded
    end proves every earlier result is counted. A partition whose retention already deleted
    everything up to the end has nothing left to drain.
    """
    lagging: list[PartitionLag] = []
    for partition, end in sorted(end_offsets.items()):
        if end <= 0:
            continue
        tp = TopicPartition(topic, partition)
        committed = reader.committed(tp)
        if committed is not None and committed >= end:
            continue
        if reader.beginning_offsets([tp]).get(tp, 0) >= end:
            continue
        lagging.append(PartitionLag(partition, end, committed))
    return lagging
