"""What every fault case shares: a stream over two boards, the reference, the exactness poll,
and the summary each case records (printed at the end of the run, see conftest.py)."""

from __future__ import annotations

import contextlib
import random
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any, ClassVar

import redis

from leaderboard import keys
from leaderboard.models import BoardOrder, MatchResult, ScoringRule
from leaderboard.selectors.boards import BoardRef
from seasons.models import Season, SeasonStatus
from tests.factories import board_factory
from tests.helpers import as_board, board_read, expected_board, make_season
from tests.ingestion.ingest_helpers import ConsumerProcess, Result, unique_results

# A double count changes a sum and a lost result changes it too: the main board is cumulative
# (desc). The second board is a lap time: asc, best, so a lost or replayed result shows as a
# different best or a different "first reached" tick.
LAPS = "laps"


@dataclass
class Stream:
    """The messages of a case and the boards they must produce."""

    season: Season
    boards: list[BoardRef]
    messages: list[Result]
    distinct: list[Result] = field(init=False)
    # Every board key (season-long and daily) -> the reference sorted set.
    expected: dict[str, dict[int, int]] = field(init=False)

    def __post_init__(self) -> None:
        self.distinct = unique_results(self.messages)
        self.expected = {}
        for ref in self.boards:
            self.expected[keys.board(board_id=ref.id)] = expected_board(ref, self.distinct)
            on_board = [r for r in self.distinct if r.board == ref.slug]
            for day in sorted({r.achieved_at.astimezone(UTC).date() for r in on_board}):
                key = keys.daily_board(board_id=ref.id, day=day)
                self.expected[key] = expected_board(ref, self.distinct, day=day)

    def chunks(self, count: int) -> list[list[Result]]:
        size = -(-len(self.messages) // count)
        return [self.messages[i : i + size] for i in range(0, len(self.messages), size)]


def make_stream(*, count: int, players: int, seed: int, days: int = 3) -> Stream:
    """``count`` results over the two boards and ``days`` days (so several daily boards),
    plus 5% game-server retries (the same message again, some much later)."""
    # Active, as a season taking results is: the repair of lost Redis writes looks only at the
    # boards of live seasons.
    season = make_season(rule=ScoringRule.CUMULATIVE, status=SeasonStatus.ACTIVE)
    laps = board_factory(season, LAPS, order=BoardOrder.ASC, rule=ScoringRule.BEST)
    rng = random.Random(seed)
    messages = []
    for _ in range(count):
        on_laps = rng.random() < 0.4
        messages.append(
            Result(
                uuid.UUID(int=rng.getrandbits(128), version=4),
                rng.randint(1, players),
                season.id,
                rng.randint(60_000, 90_000) if on_laps else rng.randint(0, 500),
                season.starts_at + timedelta(seconds=rng.randint(0, days * 86400 - 1)),
                board=LAPS if on_laps else "main",
            )
        )
    for original in rng.sample(range(count), count // 20):
        messages.insert(rng.randint(original + 1, len(messages)), messages[original])
    return Stream(season, [as_board(season), as_board(laps)], messages)


@dataclass(frozen=True)
class StoredDifferences:
    """PostgreSQL against the reference."""

    lost: int  # expected results with no row
    doubled: int  # rows beyond one per expected result

    def __bool__(self) -> bool:
        return bool(self.lost or self.doubled)


def stored_differences(stream: Stream) -> StoredDifferences:
    """PostgreSQL against the reference: results missing, and rows beyond one per expected
    result."""
    rows = Counter(
        MatchResult.objects.filter(board__season=stream.season).values_list(
            "match_id", "player_id", "board__slug", "points"
        )
    )
    want = {(r.match_id, r.player_id, r.board, r.points) for r in stream.distinct}
    return StoredDifferences(
        lost=len(want - rows.keys()),
        doubled=sum(n - 1 for n in rows.values()) + len(rows.keys() - want),
    )


@dataclass(frozen=True)
class BoardDifference:
    """How one board key differs from the reference."""

    key: str
    missing: int  # players the reference has and the board lacks
    extra: int  # players on the board the reference does not have
    wrong_scores: int  # players on both, with another score

    def __str__(self) -> str:
        return (
            f"{self.key}: {self.missing} missing, {self.extra} extra, "
            f"{self.wrong_scores} wrong scores"
        )


def board_differences(client: Any, stream: Stream) -> list[BoardDifference]:
    """Each board key that differs from the reference, with how (empty: all exact)."""
    wrong = []
    for key, want in stream.expected.items():
        got = board_read(client, key)
        if got != want:
            wrong.append(
                BoardDifference(
                    key=key,
                    missing=len(want.keys() - got.keys()),
                    extra=len(got.keys() - want.keys()),
                    wrong_scores=sum(1 for p in want.keys() & got.keys() if got[p] != want[p]),
                )
            )
    return wrong


@dataclass(frozen=True)
class Exactness:
    """A case's boards and PostgreSQL reached the reference: how long it took, and what
    PostgreSQL lost or doubled on the way (both 0 once exact)."""

    seconds: float  # from the fault's end (a time.monotonic()) to every board exact
    lost: int
    doubled: int


@dataclass(frozen=True)
class Outcome:
    """The figures of one case: a row of the fault suite's table and of its JSON report."""

    case: str
    fault: str
    results: int  # distinct results (messages, with the retries, are more)
    messages: int
    seconds_to_exact: float  # from the fault's end (or the last kill) to every board exact
    seconds: float  # the whole case, set by the recorder
    lost: int
    doubled: int
    wrong_board_keys: int
    note: str = ""
    # Reads during the case (``Reader``): None where the case did not read.
    reads: ReadTally | None = None

    @classmethod
    def exact(
        cls,
        case: str,
        fault: str,
        stream: Stream,
        exactness: Exactness,
        *,
        note: str = "",
        reads: ReadTally | None = None,
    ) -> Outcome:
        """A case that ended exact (every board and PostgreSQL equal to the reference)."""
        return cls(
            case=case,
            fault=fault,
            results=len(stream.distinct),
            messages=len(stream.messages),
            seconds_to_exact=round(exactness.seconds, 1),
            seconds=0.0,
            lost=exactness.lost,
            doubled=exactness.doubled,
            wrong_board_keys=0,
            note=note,
            reads=reads,
        )

    @classmethod
    def not_exact(cls, case: str, fault: str, stream: Stream, *, note: str) -> Outcome:
        """A case whose boards never became exact: kept in the table, not skipped (-1 stands
        for "no figure")."""
        return cls(
            case=case,
            fault=fault,
            results=len(stream.distinct),
            messages=len(stream.messages),
            seconds_to_exact=-1.0,
            seconds=0.0,
            lost=-1,
            doubled=-1,
            wrong_board_keys=-1,
            note=note,
        )

    @property
    def is_exact(self) -> bool:
        return self.seconds_to_exact >= 0


@dataclass(frozen=True)
class TableRow:
    """An Outcome as the summary table prints it, one cell a field (in the columns' order)."""

    case: str
    fault: str
    results: str
    seconds_to_exact: str
    lost: str
    doubled: str
    case_seconds: str
    note: str
    reads: str

    COLUMNS: ClassVar[tuple[str, ...]] = (
        "case",
        "fault",
        "results",
        "seconds to exact",
        "lost",
        "doubled",
        "case seconds",
        "note",
        "reads during the case",
    )

    @classmethod
    def of(cls, outcome: Outcome) -> TableRow:
        # A case that never got exact records -1: "not exact" and "-", never a figure.
        counted = outcome.lost >= 0
        return cls(
            case=outcome.case,
            fault=outcome.fault,
            results=f"{outcome.results} ({outcome.messages} messages)",
            seconds_to_exact=(
                f"{outcome.seconds_to_exact:.1f}" if outcome.is_exact else "not exact"
            ),
            lost=str(outcome.lost) if counted else "-",
            doubled=str(outcome.doubled) if counted else "-",
            case_seconds=str(outcome.seconds),
            note=outcome.note,
            reads=outcome.reads.describe() if outcome.reads is not None else "-",
        )

    @staticmethod
    def _line(cells: tuple[str, ...]) -> str:
        return f"| {' | '.join(cells)} |"

    @classmethod
    def header(cls) -> str:
        return cls._line(cls.COLUMNS)

    def line(self) -> str:
        return self._line(tuple(getattr(self, f.name) for f in fields(self)))


# Filled by the cases, printed by conftest.pytest_terminal_summary.
OUTCOMES: list[Outcome] = []


def wait_exact(
    client: Any,
    stream: Stream,
    *,
    since: float,
    timeout: float,
    stalled: float | None = None,
    context: Callable[[], str] | None = None,
) -> Exactness:
    """Poll until PostgreSQL and every board equal the reference; return how long it took from
    ``since`` (a time.monotonic()) and what PostgreSQL lost or doubled. Fail with what differs
    after ``timeout``, or sooner with ``stalled``: once the differences have stayed the same
    that long, nothing (no ingest, no repair) is changing the boards any more."""
    deadline = time.monotonic() + timeout
    last: tuple[StoredDifferences, list[BoardDifference]] | None = None
    unchanged_since = time.monotonic()
    while True:
        stored = stored_differences(stream)
        wrong = board_differences(client, stream)
        if not (stored or wrong):
            return Exactness(
                seconds=time.monotonic() - since, lost=stored.lost, doubled=stored.doubled
            )
        now = time.monotonic()
        if (stored, wrong) != last:
            last, unchanged_since = (stored, wrong), now
        stuck = stalled is not None and now - unchanged_since > stalled
        if now > deadline or stuck:
            why = f"unchanged for {stalled}s" if stuck else f"not exact within {timeout}s"
            detail = f"\n{context()}" if context is not None else ""
            raise AssertionError(
                f"{why}: PostgreSQL lost {stored.lost}, doubled {stored.doubled}; "
                f"boards wrong: {[str(d) for d in wrong]}{detail}"
            )
        time.sleep(0.2)


class FaultConsumer(ConsumerProcess):
    """A consumer process that can tell when its latest start has reached its poll loop (a
    SIGTERM before that is Python's default: the process dies with -15, not a clean stop)."""

    # Where the log stood at the latest start: a start killed before its poll loop leaves
    # no "consuming" line, so the lines must be looked for after it, not counted.
    _log_at_start = 0
    group = ""

    def start(self) -> None:
        self._log_at_start = self.log.stat().st_size if self.log.exists() else 0
        super().start()

    def _consuming(self) -> bool:
        with self.log.open("rb") as log:
            log.seek(self._log_at_start)
            return b" consuming " in log.read()

    def stop(self) -> None:
        """SIGTERM once it consumes: it finishes and commits its batch and exits 0."""
        self.wait_for(self._consuming, timeout=60)
        assert self.signal(signal.SIGTERM) == 0


def consumer(
    *, topic: str, dlq: str, group: str, log: Path, instance: int = 0, **env: str
) -> FaultConsumer:
    """A consumer process; ``instance`` is its static member id within the group (a
    replacement with the same id takes the dead member's partitions back at once)."""
    process = FaultConsumer(topic=topic, dlq=dlq, group=group, log=log)
    process.group = group
    process.args[process.args.index("--instance-id") + 1] = f"{group}-{instance}"
    # The repair watch (a new Redis run id) looks every second by default; say so here, since
    # the Redis cases' seconds-to-exact depend on it.
    process.env.update({"INGEST_FAILOVER_CHECK_SECONDS": "1", **env})
    return process


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivateRedis:
    """A redis-server of the test's own (never the shared one), with an AOF fsynced every
    second as in production, so that it can be killed, flushed and its AOF cut."""

    def __init__(self, directory: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed")
        self.binary = binary
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=5)

    def start(self) -> None:
        args = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.dir),
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--save",
            "",
            "--logfile",
            str(self.dir / "redis.log"),
        ]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                if self.client().ping():
                    return
            except redis.exceptions.ConnectionError:
                pass
            except redis.exceptions.BusyLoadingError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                log = (self.dir / "redis.log").read_text(errors="replace")[-3000:]
                raise AssertionError(f"private redis-server did not start:\n{log}")
            time.sleep(0.05)

    def shutdown(self) -> None:
        """A clean stop (SHUTDOWN: the AOF fsynced, nothing lost)."""
        assert self.proc is not None
        with contextlib.suppress(redis.exceptions.ConnectionError):
            self.client().shutdown()
        self.proc.wait(timeout=30)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill()

    def incr_aof(self) -> Path:
        """The AOF file being appended to (Redis 7: the last INCR file of appendonlydir)."""
        files = sorted((self.dir / "appendonlydir").glob("*.incr.aof"))
        assert files, list(self.dir.rglob("*"))
        return files[-1]


@dataclass
class ReadTally:
    ok: int = 0  # 200 (or 404 for a player never seen yet)
    unavailable: int = 0  # 503 with Retry-After and a JSON reason
    server_errors: int = 0  # any other 5xx, or a 503 without Retry-After
    wrong: int = 0  # a 200 that contradicts an earlier 200 (a board served as truth, wrong)
    examples: list[str] = field(default_factory=list)

    def describe(self) -> str:
        return (
            f"{self.ok + self.unavailable + self.server_errors} reads: {self.ok} answered, "
            f"{self.unavailable} 503 with Retry-After, {self.server_errors} server errors, "
            f"{self.wrong} wrong 200s"
        )


class Reader:
    """Reads a stream's boards through the API on a thread, every ~20 ms, while a fault
    happens, and tallies what the clients got. The stream's boards only ever improve (no void,
    no ban): the main board is cumulative (a player's points never go down), laps is asc best
    (a player's time never gets worse), and no board ever loses a player. So a 200 that shows
    less than an earlier 200 is a wrong board served as truth: an empty or partial board, or
    one rolled back. The boards list's size is held to the same (null only while recovering)."""

    def __init__(self, stream: Stream, *, players: int = 5) -> None:
        self.stream = stream
        self.tally = ReadTally()
        season = stream.season.id
        self.laps_players = sorted({r.player_id for r in stream.distinct if r.board == LAPS})[
            :players
        ]
        self.urls = [
            f"/api/seasons/{season}/leaderboard/ranks?start=1&count=1000",
            f"/api/seasons/{season}/leaderboard/top?limit=100",
            f"/api/seasons/{season}/boards",
            *(f"/api/seasons/{season}/boards/{LAPS}/players/{p}" for p in self.laps_players),
        ]
        self._points: dict[int, int] = {}  # main: the most points a 200 showed
        self._laps: dict[int, int] = {}  # laps: the best (lowest) time a 200 showed
        self._sizes: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Reader:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _wrong(self, what: str) -> None:
        self.tally.wrong += 1
        if len(self.tally.examples) < 10:
            self.tally.examples.append(what)

    def _run(self) -> None:
        from django.db import connection
        from django.test import Client

        client = Client()
        try:
            while not self._stop.wait(0.02):
                for url in self.urls:
                    self._read(client, url)
        finally:
            connection.close()

    def _read(self, client: Any, url: str) -> None:
        response = client.get(url)
        status = response.status_code
        if status == 503 and response.headers.get("Retry-After") and response.json().get("detail"):
            self.tally.unavailable += 1
            return
        if status >= 500:
            self.tally.server_errors += 1
            if len(self.tally.examples) < 10:
                self.tally.examples.append(f"{url}: {status}")
            return
        body = response.json()
        if url.endswith("/boards"):
            self._check_sizes(body)
        elif f"/boards/{LAPS}/players/" in url:
            player = int(url.rsplit("/", 1)[1])
            if status == 404:
                if player in self._laps:
                    self._wrong(f"{url}: 404 after a 200")
                    return
            else:
                points = int(body["points"])
                if points > self._laps.get(player, points):
                    self._wrong(f"{url}: {points} after {self._laps[player]}")
                self._laps[player] = min(points, self._laps.get(player, points))
        else:
            for entry in body:
                player, points = int(entry["playerId"]), int(entry["points"])
                if points < self._points.get(player, points):
                    self._wrong(f"{url}: player {player} {points} after {self._points[player]}")
                self._points[player] = max(points, self._points.get(player, points))
        self.tally.ok += 1

    def _check_sizes(self, boards: list[dict[str, Any]]) -> None:
        for listed in boards:
            slug, size = listed["slug"], listed["size"]
            if size is None:
                if not listed.get("recovering"):
                    self._wrong(f"boards list: {slug} size null, not recovering")
                continue
            if size < self._sizes.get(slug, size):
                self._wrong(f"boards list: {slug} size {size} after {self._sizes[slug]}")
            self._sizes[slug] = max(size, self._sizes.get(slug, size))


class Publisher:
    """Publishes ``messages`` in chunks of ``size`` every ``every`` seconds on a thread: a
    stream that keeps flowing while a fault happens, as game servers' would."""

    def __init__(self, topic: str, messages: list[Result], *, size: int, every: float) -> None:
        self.topic = topic
        self.messages = messages
        self.size = size
        self.every = every
        self.done = threading.Event()
        self.errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Publisher:
        self._thread.start()
        return self

    def _run(self) -> None:
        from tests.ingestion.ingest_helpers import publish_results

        try:
            for i in range(0, len(self.messages), self.size):
                publish_results(self.topic, self.messages[i : i + self.size])
                time.sleep(self.every)  # the stream's rate
        except BaseException as exc:
            self.errors.append(exc)
        finally:
            self.done.set()

    def join(self, timeout: float = 60) -> None:
        assert self.done.wait(timeout), "the publisher did not finish"
        assert not self.errors, self.errors
