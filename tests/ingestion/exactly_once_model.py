"""A model of ingestion and every board repair, driven step by step against the real services.

The consumer is ingestion's own batch handler (``match_results_ingest``) over an in-memory
Kafka log: its ``retrying`` seam, which wraps each step that talks to a dependency, holds the
Redis step back, so a consumer can be frozen between its PostgreSQL commit and its Redis
apply for as many steps as the test likes, then resumed, or crashed (the batch's apply is lost
and the partition is delivered again from the group's committed offset). Between those steps
run the reconcile, rebuilds, the recovery and a loss of every Redis key, exactly as production
runs them, against PostgreSQL and Redis. The reference is computed in Python from the results
produced (``tests.helpers.expected_board``), never from the code under test.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any, TypeVar

from ingestion.records import ConsumedRecord, DeadLetter
from ingestion.services import match_results_ingest
from leaderboard import keys
from leaderboard.models import Board, ScoringRule
from leaderboard.redis import BoardRedis, get_board_redis
from leaderboard.selectors.boards import BoardRef
from leaderboard.services import (
    board_mark_intact,
    board_rebuild,
    board_reconcile,
    boards_recover,
)
from seasons.models import Season
from tests.helpers import as_board, board_read, expected_board
from tests.ingestion.ingest_helpers import Result

T = TypeVar("T")


class CollectingSink:
    """Dead letters kept in memory: the model produces valid results only, so any is a bug."""

    def __init__(self) -> None:
        self.letters: list[DeadLetter] = []

    def publish(self, *, letters: Sequence[DeadLetter]) -> None:
        self.letters.extend(letters)


@dataclass
class HeldBatch:
    """A batch stored in PostgreSQL whose Redis apply has not run yet."""

    apply: Callable[[], Any]
    ends: dict[int, int]  # partition -> the next offset after the batch
    players: frozenset[int]  # the players of its records (the record key is the player id)


@dataclass
class SimConsumer:
    name: str
    positions: dict[int, int] = field(default_factory=dict)  # partition -> next offset to read
    held: HeldBatch | None = None


class IngestModel:
    """The Kafka log, the consumer group and the reference of one season's boards."""

    def __init__(
        self,
        *,
        season: Season,
        boards: Sequence[Board],
        partitions: int = 3,
        players: int = 25,
        seed: int = 0,
        consumers: int = 2,
    ) -> None:
        self.season = season
        self.boards: list[BoardRef] = [as_board(b) for b in boards]
        self.topic = f"model-{uuid.uuid4().hex[:12]}"
        self.rng = random.Random(seed)
        self.players = players
        self.log: dict[int, list[ConsumedRecord]] = {p: [] for p in range(partitions)}
        self.committed: dict[int, int] = dict.fromkeys(range(partitions), 0)
        self.consumers = [SimConsumer(f"c{n}") for n in range(consumers)]
        # (match, player, board slug) -> the result; a retry of a message carries the same one.
        self.results: dict[tuple[uuid.UUID, int, str], Result] = {}
        self.sink = CollectingSink()
        self.client: BoardRedis = get_board_redis()
        self.now = datetime.now(UTC)
        # Results fall on the last three UTC days, all inside the season and none in the future.
        self.days = sorted({(self.now - timedelta(days=n)).date() for n in range(3)})
        self.saved: list[tuple[Any, Any, Any]] | None = None
        self.mark_intact()

    # --- the game servers -----------------------------------------------------------------

    def _achieved_at(self) -> datetime:
        start = datetime.combine(self.days[0], datetime.min.time(), tzinfo=UTC)
        span = int((self.now - start).total_seconds()) - 60
        # A coarse grid of times makes equal ticks (ties on the time part) frequent.
        return start + timedelta(seconds=self.rng.randrange(0, span, 7))

    def produce(self, count: int) -> None:
        """``count`` messages onto random partitions; about one in eight repeats an earlier
        message (a game server's retry: same result, new offset, maybe another partition)."""
        earlier = [r for p in self.log.values() for r in p]
        for _ in range(count):
            if earlier and self.rng.random() < 0.125:
                again = self.rng.choice(earlier)
                partition = self.rng.randrange(len(self.log))
                self._append(partition, again.key, again.value)
                continue
            board = self.rng.choice(self.boards)
            result = Result(
                match_id=uuid.UUID(int=self.rng.getrandbits(128), version=4),
                player_id=self.rng.randint(1, self.players),
                season_id=self.season.id,
                points=self.rng.choice([0, 1, 2, 5, 10, 50, 100]),
                achieved_at=self._achieved_at(),
                board=board.slug,
            )
            self.results[(result.match_id, result.player_id, result.board)] = result
            # The contract's key is the player id: one player's results share a partition.
            self._append(result.player_id % len(self.log), result.key(), result.value())

    def _append(self, partition: int, key: bytes | None, value: bytes | None) -> None:
        records = self.log[partition]
        records.append(ConsumedRecord(partition, len(records), key, value))

    # --- the consumers --------------------------------------------------------------------

    def store(
        self,
        consumer: SimConsumer,
        *,
        max_records: int = 8,
        partitions: Sequence[int] | None = None,
    ) -> bool:
        """Poll a batch (of ``partitions``, default one or two at random) and run the handler
        up to its Redis step, which is held back. False when the consumer already holds a
        batch or there is nothing to read."""
        if consumer.held is not None:
            return False
        if partitions is None:
            partitions = self.rng.sample(sorted(self.log), k=self.rng.choice([1, 1, 2]))
        records: list[ConsumedRecord] = []
        ends: dict[int, int] = {}
        for p in partitions:
            start = consumer.positions.get(p, self.committed[p])
            batch = self.log[p][start : start + self.rng.randint(1, max_records)]
            if batch:
                records += batch
                ends[p] = batch[-1].offset + 1
        if not records:
            return False
        held: list[Callable[[], Any]] = []

        def retrying(what: str, operation: Callable[[], T]) -> T:
            if what == "Redis":
                # Held: the counts and the outbox entries it would have answered (the model
                # follows the boards; the held apply's events stay in the outbox).
                held.append(operation)
                return (0, 0, 0, ())  # type: ignore[return-value]
            return operation()

        match_results_ingest(
            topic=self.topic, records=records, dead_letters=self.sink, retrying=retrying
        )
        assert not self.sink.letters, self.sink.letters
        consumer.positions.update(ends)
        # A batch with nothing to apply (all duplicates) has no Redis step either.
        consumer.held = HeldBatch(
            apply=held[0] if held else lambda: None,
            ends=ends,
            players=frozenset(int(r.key or b"0") for r in records),
        )
        return True

    def apply(self, consumer: SimConsumer) -> bool:
        """Resume a frozen consumer: its Redis step runs, then it commits the batch's offsets
        (never moving the group's committed offset back, as the consumer's commits don't)."""
        held = consumer.held
        if held is None:
            return False
        held.apply()
        consumer.held = None
        for p, end in held.ends.items():
            self.committed[p] = max(self.committed[p], end)
        return True

    def crash(self, consumer: SimConsumer) -> None:
        """SIGKILL: the held apply never runs; a restart reads from the committed offsets."""
        consumer.held = None
        consumer.positions.clear()

    def drain(self) -> None:
        """Resume every frozen consumer, then let one consumer read every partition to its end."""
        for consumer in self.consumers:
            self.apply(consumer)
        first = self.consumers[0]
        first.positions.clear()
        while any(self.committed[p] < len(self.log[p]) for p in self.log):
            assert self.store(first, max_records=50, partitions=sorted(self.log))
            self.apply(first)

    # --- the repairs ----------------------------------------------------------------------

    def reconcile(self, board: BoardRef, day: date | None, *, full: bool) -> None:
        board_reconcile(
            board_id=board.id,
            day=day,
            topic=self.topic,
            sample_size=10,
            full_max_members=10_000 if full else 0,
            recent_since=self.now - timedelta(days=1) if not full else None,
        )

    def rebuild(self, board: BoardRef, day: date | None) -> None:
        board_rebuild(board_id=board.id, day=day, reason="model")

    def recover(self) -> None:
        boards_recover(now=datetime.now(UTC), topic=self.topic)

    def lose_redis(self) -> None:
        """Redis loses every key of this test (a FLUSHALL as far as this test can tell)."""
        pipe = self.client.pipeline(transaction=False)
        for key in self.client.scan_iter(match=keys.prefix_pattern(), count=1000):
            pipe.unlink(key)
        pipe.execute()

    def checkpoint(self) -> None:
        """Remember every key of this test as it is now (what an AOF fsynced now would hold:
        not the checked keys, which are never persisted)."""
        checked = {keys.board_checked(board_id=b.id).encode() for b in self.boards}
        self.saved = [
            (key, self.client.dump(key), self.client.pttl(key))
            for key in self.client.scan_iter(match=keys.prefix_pattern(), count=1000)
            if key not in checked
        ]

    def restart_from_checkpoint(self) -> None:
        """Redis restarts from the last checkpoint: every write since is lost (boards and
        watermarks together, as a short AOF or a lagging replica loses them), and it comes back
        with a new run id."""
        if self.saved is None:
            return
        self.lose_redis()
        for key, value, ttl in self.saved:
            if value is not None:
                self.client.restore(key, max(int(ttl), 0), value, replace=True)
        # The real server keeps its run id: the recovery is told of the restart the way it
        # notices one, a run id it has not seen.
        self.client.set(
            keys.redis_run_id_seen(), f"an-older-run {datetime.now(UTC).timestamp():.3f}"
        )

    def mark_intact(self) -> None:
        for board in self.boards:
            board_mark_intact(board_id=board.id)
            watermark = keys.ingest_applied_offsets(board_id=board.id, topic=self.topic)
            self.client.hset(watermark, "recovered", "1")

    # --- the reference --------------------------------------------------------------------

    def expected(self, board: BoardRef, day: date | None) -> dict[int, int]:
        return expected_board(board, self.results.values(), day=day)

    @staticmethod
    def key(board: BoardRef, day: date | None) -> str:
        if day is None:
            return keys.board(board_id=board.id)
        return keys.daily_board(board_id=board.id, day=day)

    def actual(self, board: BoardRef, day: date | None) -> dict[int, int]:
        return board_read(self.client, self.key(board, day))

    def differences(self) -> list[str]:
        """Every key of every board against the reference: what is missing, extra or wrong."""
        found: list[str] = []
        for board in self.boards:
            for day in (None, *self.days):
                want, have = self.expected(board, day), self.actual(board, day)
                if want != have:
                    wrong = sorted(
                        (p, have.get(p), want.get(p))
                        for p in set(want) | set(have)
                        if want.get(p) != have.get(p)
                    )
                    found.append(
                        f"{board.slug} {day or 'season'}: (player, redis, expected) {wrong}"
                    )
        return found

    def never_doubled(self) -> list[str]:
        """At any moment, a cumulative board holds at most the sum of every result produced
        (points are never negative): above it, something was counted twice."""
        found: list[str] = []
        for board in self.boards:
            if board.rule != ScoringRule.CUMULATIVE:
                continue
            codec = board.codec
            ceiling = {p: codec.decode(s).points for p, s in self.expected(board, None).items()}
            for player, score in self.actual(board, None).items():
                points = codec.decode(score).points
                if points > ceiling.get(player, -1):
                    found.append(f"{board.slug}: player {player} {points} > {ceiling.get(player)}")
        return found
