"""Helpers for the ingestion tests: publish contract messages, check the boards they make."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from ingestion.consumer import ConsumerOptions
from leaderboard import keys
from leaderboard.models import Board
from leaderboard.redis import BoardRedis
from leaderboard.selectors.boards import BoardRef
from leaderboard.services import ResultRow
from seasons.models import Season
from tests.helpers import (
    as_board,
    board_read,
    expected_board,
    subprocess_database_url,
    wait_until,
)


@dataclass(frozen=True)
class Result:
    """A result as the reference computation (tests.helpers.expected_board) reads it."""

    match_id: uuid.UUID
    player_id: int
    season_id: int
    points: int
    achieved_at: datetime
    voided_at: datetime | None = None
    board: str = "main"  # the board's slug ("board" is left out of the message for main)

    def message(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "matchId": str(self.match_id),
            "playerId": self.player_id,
            "seasonId": self.season_id,
            "points": self.points,
            "achievedAt": self.achieved_at.isoformat(),
        }
        if self.board != "main":
            body["board"] = self.board
        return body

    def value(self) -> bytes:
        return json.dumps(self.message()).encode()

    def key(self) -> bytes:
        return str(self.player_id).encode()

    def row(self, *, partition: int, offset: int) -> ResultRow:
        """The row the consumer stores for this result, as Kafka record (partition, offset)."""
        board = Board.objects.get(season_id=self.season_id, slug=self.board)
        return ResultRow(
            self.match_id,
            self.player_id,
            self.season_id,
            board.id,
            self.points,
            self.achieved_at,
            partition,
            offset,
        )


def seeded_results(season: Season, count: int, *, players: int, seed: int) -> list[Result]:
    """``count`` results of up to ``players`` players, one a second from a minute into the
    season, drawn from ``seed``: the same list on every run."""
    rng = random.Random(seed)
    return [
        Result(
            uuid.UUID(int=rng.getrandbits(128), version=4),
            rng.randint(1, players),
            season.id,
            rng.randint(0, 1000),
            season.starts_at + timedelta(seconds=60 + i),
        )
        for i in range(count)
    ]


def consumer_options(*, topic: str, dead_letter_topic: str, **overrides: Any) -> ConsumerOptions:
    """Options for a test's consumer; an override of None keeps the setting's value."""
    fields: dict[str, Any] = {
        "group_id": f"test-{uuid.uuid4().hex[:12]}",
        "poll_timeout_ms": 100,
        "stats_interval_seconds": 1.0,
        "backoff_max_seconds": 1.0,
    }
    fields.update(overrides)
    return ConsumerOptions.from_settings(topic=topic, dead_letter_topic=dead_letter_topic, **fields)


def publish(topic: str, messages: Iterable[tuple[bytes | None, bytes | None]]) -> int:
    producer = KafkaProducer(
        bootstrap_servers=settings.KAFKA_BOOTSTRAP_SERVERS, acks="all", linger_ms=5
    )
    sent = 0
    for key, value in messages:
        producer.send(topic, key=key, value=value)
        sent += 1
    producer.flush()
    producer.close()
    return sent


def publish_results(topic: str, results: Iterable[Result]) -> int:
    return publish(topic, ((r.key(), r.value()) for r in results))


def end_offsets(topic: str) -> dict[int, int]:
    consumer = KafkaConsumer(bootstrap_servers=settings.KAFKA_BOOTSTRAP_SERVERS)
    partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
    ends = consumer.end_offsets(partitions)
    consumer.close()
    return {tp.partition: offset for tp, offset in ends.items()}


def committed_offsets(topic: str, group_id: str) -> dict[int, int | None]:
    consumer = KafkaConsumer(
        bootstrap_servers=settings.KAFKA_BOOTSTRAP_SERVERS,
        group_id=group_id,
        enable_auto_commit=False,
    )
    partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
    committed = {tp.partition: consumer.committed(tp) for tp in partitions}
    consumer.close(autocommit=False)
    return committed


def daily_keys(season: object, results: Sequence[Result]) -> set[date]:
    return {r.achieved_at.astimezone(UTC).date() for r in results}


def assert_boards_match(
    client: BoardRedis, season: Season | Board | BoardRef, results: Sequence[Result]
) -> None:
    """The board (a season: its main board), season-long and every daily board, equals the
    reference computed from ``results``."""
    ref = as_board(season)
    # expected_board reads MatchResult attributes; Result has the same ones.
    rows: list[Any] = [r for r in results if r.board == ref.slug]
    assert board_read(client, keys.board(board_id=ref.id)) == expected_board(ref, rows)
    for day in daily_keys(season, rows):
        assert board_read(client, keys.daily_board(board_id=ref.id, day=day)) == expected_board(
            ref, rows, day=day
        ), f"daily board {day}"


def unique_results(results: Iterable[Result]) -> list[Result]:
    """The results PostgreSQL keeps: the first message of each (match, player, board)."""
    seen: dict[tuple[uuid.UUID, int, str], Result] = {}
    for r in results:
        seen.setdefault((r.match_id, r.player_id, r.board), r)
    return list(seen.values())


class TcpProxy:
    """A loopback TCP proxy that can cut its clients off, to play a dependency going away.

    While cut, every connection (open or new) is closed at once: to the client the service is
    unreachable. ``restore`` lets connections through again.

    One thread owns the listening socket and never blocks for long (accept has a short
    timeout), so that it, not another thread, closes and reopens it: closing a socket another
    thread is blocked accepting on leaves it listening in the kernel on Linux. A failure inside
    the proxy is kept and raised by the next cut/restore/close, never lost with a thread.
    """

    _TICK = 0.02

    def __init__(self, target_port: int, *, listen_port: int = 0) -> None:
        self._target_port = target_port
        self._cut = threading.Event()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._refuse = False
        self._errors: list[BaseException] = []
        self._listener: socket.socket | None = self._listen(listen_port)
        self.port = self._listener.getsockname()[1]
        # Changes asked for (cut/restore) and changes the accept thread has applied.
        self._asked = 0
        self._applied = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @staticmethod
    def _listen(port: int) -> socket.socket:
        listener = socket.create_server(("127.0.0.1", port))
        listener.settimeout(TcpProxy._TICK)
        return listener

    def _serve(self) -> None:
        try:
            while not self._closed.is_set():
                asked = self._asked  # read before the state it covers
                if self._refuse:
                    if self._listener is not None:
                        self._listener.close()
                        self._listener = None
                    self._applied = asked
                    time.sleep(self._TICK)
                    continue
                if self._listener is None:
                    self._listener = self._listen(self.port)
                self._applied = asked
                try:
                    client, _ = self._listener.accept()
                except TimeoutError:
                    continue
                client.settimeout(None)
                if self._cut.is_set():
                    client.close()
                    continue
                try:
                    upstream = socket.create_connection(("127.0.0.1", self._target_port))
                except OSError:
                    client.close()  # the service itself is down: so is the proxy
                    continue
                with self._lock:
                    self._open += [client, upstream]
                for source, sink in ((client, upstream), (upstream, client)):
                    threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()
        except BaseException as exc:
            self._errors.append(exc)
        finally:
            if self._listener is not None:
                self._listener.close()
                self._listener = None

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def _settle(self) -> None:
        """Wait until the accept thread has applied the last change; raise what it met."""
        self._asked += 1
        deadline = time.monotonic() + 5
        while self._thread.is_alive() and self._applied < self._asked:
            if time.monotonic() > deadline:
                raise AssertionError("the TCP proxy did not apply a cut or restore within 5s")
            time.sleep(self._TICK / 2)
        if self._errors:
            raise AssertionError(f"the TCP proxy failed: {self._errors[0]!r}")

    def cut(self, *, refuse: bool = False) -> None:
        """Close every connection; with ``refuse``, also stop listening, so that new ones are
        refused (a service that is down) rather than accepted and dropped."""
        self._cut.set()
        if refuse:
            self._refuse = True
        with self._lock:
            for s in self._open:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            self._open.clear()
        self._settle()

    def restore(self) -> None:
        self._refuse = False
        self._cut.clear()
        self._settle()

    def close(self) -> None:
        self._closed.set()
        self.cut()
        self._thread.join(timeout=5)


MANAGE = Path(settings.BASE_DIR) / "manage.py"


def _logger_of(log_line: str) -> str:
    fields = log_line.split(" ", 4)
    return fields[3] if len(fields) > 3 else ""


class ConsumerProcess:
    """The consumer command against this test's database, key prefix, topics and group."""

    def __init__(self, *, topic: str, dlq: str, group: str, log: Path, instance: int = 0) -> None:
        # ``instance`` tells apart the members of one group: each needs its own static
        # membership id, or the coordinator fences all but the last to join.
        self.args = [
            sys.executable,
            str(MANAGE),
            "consume_match_results",
            "--topic",
            topic,
            "--dead-letter-topic",
            dlq,
            "--group",
            group,
            "--instance-id",
            f"{group}-{instance}",
            "--stats-interval",
            "1",
        ]
        self.env = {
            **os.environ,
            "DATABASE_URL": subprocess_database_url(),
            "LEADERBOARD_KEY_PREFIX": settings.LEADERBOARD_KEY_PREFIX,
            "INGEST_MAX_POLL_RECORDS": "1000",
            "INGEST_BACKOFF_MAX_SECONDS": "1",
        }
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.args, env=self.env, stdout=out, stderr=out)

    def log_tail(self, lines: int = 60) -> str:
        """The end of the process's log, for a failing wait to show what the consumer said.

        kafka-python's own ERROR lines (one per refused connection) are dropped: they would
        crowd out the consumer's.
        """
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        # A line reads "<date> <time> <LEVEL> <logger> <message>".
        kept = [line for line in text.splitlines() if not _logger_of(line).startswith("kafka")]
        return "consumer log (tail):\n" + "\n".join(kept[-lines:])

    def signal(self, signum: int) -> int:
        assert self.proc is not None
        self.proc.send_signal(signum)
        return self.proc.wait(timeout=60)

    def wait_for(self, condition: Callable[[], bool], *, timeout: float) -> None:
        """``wait_until`` that shows the consumer's log when it fails."""
        wait_until(condition, timeout=timeout, context=self.log_tail)

    def drain_then_stop(self, *, topic: str, group: str, timeout: float) -> None:
        """Wait until the group has committed to the topic's end, then SIGTERM: exit code 0."""
        self.wait_for(
            lambda: committed_offsets(topic, group) == end_offsets(topic), timeout=timeout
        )
        assert self.signal(signal.SIGTERM) == 0

    def kill_if_running(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()


class LetterSink:
    """Dead letters kept in memory (the batch handler's sink), for tests that read them."""

    def __init__(self) -> None:
        self.letters: list[Any] = []

    def publish(self, *, letters: Sequence[Any]) -> None:
        self.letters.extend(letters)


def ingest_redelivered(
    *, topic: str, deliveries: Sequence[tuple[int, bytes]], rng: Any, batch: int = 7
) -> LetterSink:
    """Each (player id, message value) delivered one to three times, shuffled, keyed by player
    over two partitions, through the batch handler in batches of ``batch``; then a replay of
    everything: redelivery and disorder as Kafka gives them."""
    from ingestion.records import ConsumedRecord
    from ingestion.services import match_results_ingest

    records = []
    offsets = {0: 0, 1: 0}
    repeated = [d for d in deliveries for _ in range(rng.randint(1, 3))]
    rng.shuffle(repeated)
    for player, value in repeated:
        partition = player % 2
        records.append(ConsumedRecord(partition, offsets[partition], b"%d" % player, value))
        offsets[partition] += 1
    letters = LetterSink()
    for start in range(0, len(records), batch):
        match_results_ingest(
            topic=topic, records=records[start : start + batch], dead_letters=letters
        )
    match_results_ingest(topic=topic, records=records, dead_letters=letters)
    return letters
