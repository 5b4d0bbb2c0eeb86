"""Ingestion benchmark: end-to-end throughput and produce-to-visible latency, beside raw ceilings.

Run on demand (never in the test suite)::

    bench/ingest                                  # reduced scale, about two minutes
    bench/ingest --backlog 1000000 --steady-seconds 60 --burst-seconds 60 --consumers 2

Everything runs against the local services in one run, so the ratios compare like with like:

1. raw ceilings, each measured alone on the same machine:
   - Kafka consume-only: kafka-python polling the backlog topic with the consumer's settings;
   - PostgreSQL bulk insert only: the consumer's own one-statement insert
     (``match_results_store``), batches of ``--batch``, no Kafka, no Redis;
   - Redis pipelined script only: the consumer's own apply (``board_groups_apply``: the
     ``apply_results`` Lua script by SHA, one call per partition, pipelined), no Kafka, no SQL;
2. end-to-end drain: ``--backlog`` results already in the topic, then ``--consumers`` real
   ``manage.py consume_match_results`` processes in one group apply them: results/s applied;
3. steady: the consumers running, results produced at ``--steady-rate`` (2,000/s) for
   ``--steady-seconds``; one result in ``--probe-every`` is a probe (a player with no other
   result), and a poller sees it appear on the Redis board: produce-to-visible p50/p99;
4. burst: the same at ``--burst-rate`` (20,000/s) for ``--burst-seconds``, then the time the
   lag takes to drain after the burst ends.

Cluster mode: ``--cluster`` (or ``LB_REDIS_MODE=cluster LB_KAFKA_BROKERS=3`` exported, as for
every process of the project) runs it all on the local clusters (README, "Running on clusters"):
the boards on the Redis Cluster, the topics on the three brokers with the settings' replication
factor (3) and ``min.insync.replicas`` (2), the consumers inheriting the same environment. The
report's heading names the mode; the CPU figures sum every node (the six redis-servers, the
three brokers), found by the ports they listen on.

``--boards 3`` spreads the background results of the backlog, steady and burst phases over three
boards of the end-to-end season, in turn: ``main`` (desc, ``--rule``), ``asc-best`` (asc, best:
lap times) and ``latest`` (desc, latest). Probes stay on ``main``; the drains count a record
applied once one of the boards' watermarks covers it. The raw ceilings stay on one board.

``--cohort-size N`` (2..1000) then drains another backlog twice, the same results each time: to
a board of the season without cohorts and to one with cohorts of N (each its own topic, filled
first, and fresh consumers): by default most of its results are a player's first on the board,
the case where ingestion assigns a cohort in the transaction that stores the result (a season's
first hours); ``--cohort-players P`` draws them from P players instead, so that most are a
returning player's (the rest of a season). ``--cohort-rounds R`` repeats the pair on fresh
boards, alternating which runs first. Both rates, the ratio, the CPU of each, and the share of
results that were a player's first.

``--tournament`` then drains another backlog twice, the same results each time: to a plain board
and to a tournament board (``--join-required``, ``--max-attempts`` ``--tournament-attempts``,
default 1,000: every result is checked, none refused), every player of the backlog seated first
(participants bulk-inserted: the join's own cost is not what is measured). Each of its results
is decided in the storing transaction: joined, and within its attempts counted from PostgreSQL.
``--tournament-rounds R`` repeats the pair on fresh boards, alternating which runs first.

``--tiebreak N`` (1..3) then drains a second backlog of the same size, to a board of the same
season ranked by points and N tie-break columns (keys past 53 bits: wide keys, docs/scaling.md),
with the same consumers: its results/s beside the plain drain's, and each board's Redis bytes per
player (MEMORY USAGE of its keys over its players). ``--tiebreak-rounds R`` then drains one
backlog a round twice, as ``--cohort-rounds`` does: to a fresh plain board, and with the same
players, points and order plus the tie-break values to a fresh board with the columns; rounds
alternate which runs first, so neither board has the warmer machine or the emptier one.

``--events`` then drains a second backlog of the same size to a board of the same spec that
emits rank events (every board before it emits none), with consumers of its own: its results/s
beside the drain without events, and the events published. From there on the main board emits
too, so the steady and burst phases also measure produce-to-event: when each probe's
``personal_best`` is read back from the rank-events topic.

``--events-rounds R`` then measures what rank events cost on a board in a season's steady state,
beside ``--events``' worst case (a fresh board: nearly every result is a player's first or a better
one, two events or more each): R rounds of two fresh boards of main's spec, rank events off and on
(top 100). Each board first takes a warm-up drain of ``--backlog`` results over
``--events-players`` P players (default 20,000), plus one result for each player the draw missed,
so every player has a standing; then the measured drain of a second backlog of ``--backlog``
results over the same P players, most of which do not beat the player's best and emit nothing. Both
boards of a round get the same results (players, points, order); rounds alternate which board goes
first. Per round: the measured drains' rates, their ratio and CPU; the share of the measured
results that changed a player's value and the rank events the board with them published per result
(counted on the rank-events topic); the warm-up drains beside them, and the means over the rounds.

Isolation: its own database (``leaderboard_bench``, created and migrated if absent), its own
topic and consumer group, its own Redis key prefix; it removes its topic, keys and rows at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from random import Random
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RUN_TAG = uuid.uuid4().hex[:8]
# --cluster: the local clusters (README, "Running on clusters"), exactly as exporting the two
# variables; set before Django loads settings, and inherited by the consumer processes.
if "--cluster" in sys.argv[1:]:
    os.environ["LB_REDIS_MODE"] = "cluster"
    os.environ["LB_KAFKA_BROKERS"] = "3"
# Set before Django loads settings, and inherited by the consumer processes.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaderboard_project.local_clusters")
os.environ["LEADERBOARD_KEY_PREFIX"] = f"bench-{RUN_TAG}"
os.environ.setdefault("LOG_LEVEL", "WARNING")
os.environ.setdefault("KAFKA_LOG_LEVEL", "ERROR")

PROBE_BASE = 5_000_000_000  # probe player ids: never used by background results
RESULTS_DIR = ROOT / "bench" / "results"


from bench.database import bench_database_url, bench_secret_key_default  # noqa: E402

bench_secret_key_default(bench="ingest")

os.environ["DATABASE_URL"] = bench_database_url(
    name=os.environ.get("BENCH_DATABASE_NAME", "leaderboard_bench")
)

import django  # noqa: E402

django.setup()

import msgspec  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition  # noqa: E402
from kafka.admin import NewTopic  # noqa: E402
from redis.cluster import RedisCluster  # noqa: E402
from tqdm import tqdm  # noqa: E402

from ingestion.producer import (  # noqa: E402
    MatchResultProducer,
    match_result_key,
    match_result_value,
)
from ingestion.schema import MatchResultMessage  # noqa: E402
from leaderboard import keys  # noqa: E402
from leaderboard.models import (  # noqa: E402
    MAIN_BOARD,
    Board,
    BoardOrder,
    CohortMember,
    MatchResult,
    Participant,
    RefusedResult,
    ScoringRule,
    TiebreakColumn,
)
from leaderboard.redis import BoardRedis, get_board_redis  # noqa: E402
from leaderboard.selectors.boards import main_board_get  # noqa: E402
from leaderboard.services import (  # noqa: E402
    CountedResult,
    ResultColumns,
    ResultRow,
    board_create,
    board_groups_apply,
    counted_groups,
    match_results_store,
    season_setup,
    watermark_raise,
)
from seasons.models import Season  # noqa: E402


@dataclass
class Latency:
    count: int
    seen: int
    p50_ms: float | None
    p99_ms: float | None
    max_ms: float | None


@dataclass
class Profile:
    samples: int
    # (function, % of the samples): its own time (the innermost frame), and including callees.
    self_percent: list[tuple[str, float]]
    total_percent: list[tuple[str, float]]
    files: list[str] = field(default_factory=list)


@dataclass
class Report:
    started_at: str
    args: dict[str, object]
    # Where it ran: "single" or "cluster" per service, and what each is (nodes, replication).
    redis_mode: str = ""
    kafka_brokers: int = 0
    services: dict[str, str] = field(default_factory=dict)
    produce_backlog_per_s: float = 0.0
    kafka_consume_only_per_s: float = 0.0
    pg_insert_only_per_s: float = 0.0
    redis_apply_only_per_s: float = 0.0
    e2e_drain_per_s: float = 0.0
    e2e_drain_incl_startup_per_s: float = 0.0
    steady_rate_achieved_per_s: float = 0.0
    steady_latency: Latency | None = None
    burst_rate_achieved_per_s: float = 0.0
    burst_latency: Latency | None = None
    burst_drain_after_end_s: float | None = None
    # CPU seconds each kind of process used per 1,000 results during the end-to-end drain, and
    # the machine's share of busy CPU over it (where the time goes when the drain is CPU-bound).
    e2e_cpu_ms_per_1000: dict[str, float] = field(default_factory=dict)
    # The same from the first applied batch on: the consumers' start-up (imports, connecting,
    # joining the group: a fixed cost whatever the backlog) left out.
    e2e_cpu_after_startup_ms_per_1000: dict[str, float] = field(default_factory=dict)
    e2e_cpu_busy_share: float | None = None
    # Which processes each kind of the CPU figures sums (e.g. "6 redis-server on 7000-7005"),
    # and, on a Redis Cluster, the Redis figure split into masters and replicas.
    e2e_cpu_processes: dict[str, str] = field(default_factory=dict)
    e2e_cpu_parts_ms_per_1000: dict[str, float] = field(default_factory=dict)
    # CPU per 1,000 results of the Redis apply-only ceiling: the bench process (the client's
    # Python: redis-py, the pipelines) and the Redis servers (masters / replicas on a cluster).
    redis_apply_only_cpu_ms_per_1000: dict[str, float] = field(default_factory=dict)
    # Players on each board of the end-to-end season after its drain (dead letters would count
    # as handled in the watermarks: this shows the results reached every board).
    e2e_board_players: dict[str, int] = field(default_factory=dict)
    # --profile: py-spy's samples of the consumers over the drain, the functions taking the
    # largest shares (own time, and time including what they call), and the raw files.
    e2e_profile: Profile | None = None
    # --tiebreak: the second drain, to a board with that many tie-break columns, and the Redis
    # bytes per player of the plain main board and of the tie-break board after their drains.
    tiebreak_drain_per_s: float = 0.0
    # Both drains from a tenth of their backlog applied to the end (_steady_rate).
    tiebreak_steady_drain_per_s: float = 0.0
    plain_steady_drain_per_s: float = 0.0
    # CPU per 1,000 results over the tie-break drain, start-up included (as e2e_cpu_ms_per_1000).
    tiebreak_cpu_ms_per_1000: dict[str, float] = field(default_factory=dict)
    # --profile with --tiebreak: the same py-spy summary over the tie-break drain.
    tiebreak_profile: Profile | None = None
    # --cohort-size: the same backlog drained to a board without cohorts ("off-<round>") and to
    # one with cohorts of that size ("on-<round>"), each by fresh consumers of its own topic, in
    # --cohort-rounds rounds of fresh boards (asdict of Drain, by slug, in the order run).
    cohort_drains: dict[str, dict[str, object]] = field(default_factory=dict)
    # The share of the cohort backlogs' results that are a player's first on the board: the
    # results for which a board with cohorts assigns one (--cohort-players sets the mix).
    cohort_first_share: float | None = None
    # --tiebreak-rounds: the same backlog drained to a plain board ("narrow-<round>") and, with
    # the tie-break values kept, to a board with --tiebreak columns ("wide-<round>"), as above.
    tiebreak_drains: dict[str, dict[str, object]] = field(default_factory=dict)
    # --tournament: the same backlog drained to a plain board ("plain-<round>") and to a
    # tournament board ("tournament-<round>"), as the cohort drains.
    tournament_drains: dict[str, dict[str, object]] = field(default_factory=dict)
    # --events-rounds: the measured drains of warmed boards of main's spec, rank events off
    # ("events-off-<round>") and on ("events-on-<round>"), as the cohort drains, each with its
    # results, the share of them that changed a player's value, and the rank events published;
    # and the warm-up drains before them (the same fields, by the same slugs).
    events_round_drains: dict[str, dict[str, object]] = field(default_factory=dict)
    events_warmup_drains: dict[str, dict[str, object]] = field(default_factory=dict)
    redis_bytes_per_player: dict[str, float] = field(default_factory=dict)
    # --events: the second drain, to a board that emits rank events (the baseline's boards do
    # not), the events it published, and produce-to-event in the steady and burst phases.
    events_drain_per_s: float = 0.0
    events_steady_drain_per_s: float = 0.0
    events_cpu_ms_per_1000: dict[str, float] = field(default_factory=dict)
    events_cpu_after_startup_ms_per_1000: dict[str, float] = field(default_factory=dict)
    events_profile: Profile | None = None
    events_published: int = 0
    steady_event_latency: Latency | None = None
    burst_event_latency: Latency | None = None
    notes: list[str] = field(default_factory=list)


# --- data ------------------------------------------------------------------------------------


class Results:
    """Background results (skewed players, coarse points) with probes mixed in; background
    results go to ``boards`` in turn (probes to ``main``)."""

    def __init__(
        self,
        *,
        season_id: int,
        players: int,
        seed: int,
        boards: Sequence[str] = (MAIN_BOARD,),
        tiebreaks: Sequence[str] = (),
    ) -> None:
        self.season_id = season_id
        self.players = players
        self.random = Random(seed)
        self.next_probe = PROBE_BASE
        self.boards = tuple(boards)
        # Column names: every result then carries a value of each (a small count, as kills).
        self.tiebreaks = tuple(tiebreaks)
        self.sent = 0

    def one(self) -> MatchResultMessage:
        r = self.random
        regular = r.random() < 0.8
        return self.one_of(r.randrange(self.players // 5 if regular else self.players) + 1)

    def one_of(self, player: int) -> MatchResultMessage:
        """A result of ``player``, its points drawn as every background result's."""
        r = self.random
        board = self.boards[self.sent % len(self.boards)]
        self.sent += 1
        return MatchResultMessage(
            match_id=uuid.UUID(int=r.getrandbits(128), version=4),
            player_id=player,
            season_id=self.season_id,
            points=round(r.lognormvariate(7.3, 0.5) / 10) * 10,
            achieved_at=datetime.now(UTC),
            board=board,
            tiebreakers={name: r.randrange(50) for name in self.tiebreaks} or None,
        )

    def probe(self) -> MatchResultMessage:
        self.next_probe += 1
        return MatchResultMessage(
            match_id=uuid.uuid4(),
            player_id=self.next_probe,
            season_id=self.season_id,
            points=10,
            achieved_at=datetime.now(UTC),
        )


# --- helpers ---------------------------------------------------------------------------------


def _applied_total(topic: str, board_ids: list[int]) -> int:
    """Records of ``topic`` whose results are on the boards: per partition the highest of the
    boards' watermarks (each board's covers every record up to it that was handled)."""
    pipe = get_board_redis().pipeline(transaction=False)
    for board_id in board_ids:
        pipe.hgetall(keys.ingest_applied_offsets(board_id=board_id, topic=topic))
    highest: dict[bytes, int] = {}
    for raw in pipe.execute():
        for partition, value in raw.items():
            # Partitions only: a watermark raised before its drain also holds "recovered" (1),
            # which would count as two results applied before any was (the drain's first batch
            # then seemed to come at once, its consumers' start-up inside its rate).
            if partition.isdigit():
                highest[partition] = max(highest.get(partition, -1), int(value))
    return sum(v + 1 for v in highest.values())


def _wait_applied(
    topic: str,
    board_ids: list[int],
    target: int,
    *,
    timeout: float,
    desc: str,
    on_first: Callable[[int], None] | None = None,
    samples: list[tuple[float, int]] | None = None,
) -> tuple[float | None, float | None]:
    """Poll until ``target`` records are applied: (first progress time, done time).
    ``on_first`` is called with the count applied when the first progress is seen; ``samples``
    receives every (time, applied) polled."""
    first = None
    deadline = time.monotonic() + timeout
    with tqdm(total=target, desc=desc, unit="res", leave=False) as bar:
        while time.monotonic() < deadline:
            done = _applied_total(topic, board_ids)
            if samples is not None:
                samples.append((time.monotonic(), done))
            if done and first is None:
                first = time.monotonic()
                if on_first is not None:
                    on_first(done)
            bar.update(done - bar.n)
            if done >= target:
                return first, time.monotonic()
            time.sleep(0.02)
    return first, None


class ProbeWatcher(threading.Thread):
    """Sees each probe player appear on the season board; records produce-to-visible."""

    def __init__(self, board: str) -> None:
        super().__init__(daemon=True)
        self.board = board
        self.sent: dict[int, float] = {}
        self.visible: dict[int, float] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def add(self, player_id: int, at: float) -> None:
        with self.lock:
            self.sent[player_id] = at

    def run(self) -> None:
        client = get_board_redis()
        while not self.stop.is_set():
            with self.lock:
                pending = [p for p in self.sent if p not in self.visible]
            if pending:
                now = time.monotonic()
                for start in range(0, len(pending), 1000):
                    chunk = pending[start : start + 1000]
                    scores = client.zmscore(self.board, [str(p) for p in chunk])
                    for player, score in zip(chunk, scores, strict=True):
                        if score is not None:
                            self.visible[player] = now
            self.stop.wait(0.005)

    def latency(self) -> Latency:
        with self.lock:
            values = sorted(
                (self.visible[p] - t) * 1000 for p, t in self.sent.items() if p in self.visible
            )
        return _latency(len(self.sent), values)

    def all_seen(self) -> bool:
        with self.lock:
            return len(self.visible) >= len(self.sent)


def _paced_produce(
    producer: MatchResultProducer | JavaLineProducer,
    results: Results,
    *,
    rate: float,
    seconds: float,
    probe_every: int,
    watcher: ProbeWatcher | None,
    desc: str,
) -> tuple[int, float]:
    """Send at ``rate`` for ``seconds`` (probes every ``probe_every``): (sent, achieved rate)."""
    # Background results are encoded up front: at 20,000/s the bench's own JSON encoding would
    # otherwise cap the rate it offers. Probes are made when sent (their send time matters).
    background = [
        (match_result_key(m), match_result_value(m))
        for m in (results.one() for _ in range(int(rate * seconds) + 1))
    ]
    sent = 0
    started = time.monotonic()
    deadline = started + seconds
    with tqdm(total=int(rate * seconds), desc=desc, unit="res", leave=False) as bar:
        while True:
            now = time.monotonic()
            if now >= deadline:
                break
            owed = int((now - started) * rate) + 1 - sent
            for _ in range(max(0, owed)):
                if watcher is not None and sent % probe_every == 0:
                    message = results.probe()
                    producer.send(message)
                    watcher.add(message.player_id, time.monotonic())
                else:
                    key, value = background[sent % len(background)]
                    producer.send_raw(key=key, value=value)
                sent += 1
            if isinstance(producer, JavaLineProducer):
                producer.pump()
            bar.update(max(0, owed))
            time.sleep(max(0.0, min(deadline, now + 0.01) - time.monotonic()))
    producer.flush(timeout=60)
    return sent, sent / (time.monotonic() - started)


class JavaLineProducer:
    """Kafka's own console producer (the broker's jars), fed ``key<TAB>value`` lines on stdin.

    A Python producer costs about 30 us of CPU per message: at 20,000/s the producers alone
    would take a core from the consumers they are meant to load. The Java producer costs a few
    us per message; the bench only writes lines into its pipe, in slices, at the paced rate.
    """

    def __init__(self, *, topic: str, bootstrap: list[str], log: Path) -> None:
        local = Path(os.environ.get("LB_LOCAL_DIR") or ROOT / ".local")
        libs = local / "kafka" / "libs"
        if not libs.is_dir():
            raise RuntimeError(f"no Kafka jars in {libs}: run `make services` first")
        self._log = log.open("wb")
        self.process = subprocess.Popen(
            [
                "java",
                "-Xmx512m",
                "-cp",
                f"{libs}/*",
                "org.apache.kafka.tools.ConsoleProducer",
                "--bootstrap-server",
                ",".join(bootstrap),
                "--topic",
                topic,
                "--property",
                "parse.key=true",
                "--property",
                "key.separator=\t",
                # As the product's producer: acknowledged by the broker, small linger.
                "--producer-property",
                "acks=all",
                "--producer-property",
                "linger.ms=5",
                "--producer-property",
                "batch.size=262144",
            ],
            stdin=subprocess.PIPE,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self._lines: list[bytes] = []

    def send(self, message: MatchResultMessage) -> None:
        self.send_raw(key=match_result_key(message), value=match_result_value(message))

    def send_raw(self, *, key: bytes, value: bytes) -> None:
        self._lines.append(key + b"\t" + value + b"\n")

    def pump(self) -> None:
        """Hand the lines of this slice to the producer."""
        assert self.process.stdin is not None
        self.process.stdin.write(b"".join(self._lines))
        self.process.stdin.flush()
        self._lines.clear()

    def flush(self, timeout: float) -> None:
        """Send what is left and wait until the producer has delivered it all and exited."""
        self.pump()
        assert self.process.stdin is not None
        self.process.stdin.close()
        if self.process.wait(timeout=timeout) != 0:
            raise RuntimeError(f"the console producer failed (log: {self._log.name})")
        self._log.close()


def _topic_size(bootstrap: list[str], topic: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        return sum(consumer.end_offsets(partitions).values())
    finally:
        consumer.close()


def _start_loaders(
    *,
    count: int,
    season_id: int,
    topic: str,
    rate: float,
    seconds: float,
    players: int,
    bootstrap: list[str],
    produced: int,
    boards: Sequence[str],
) -> list[subprocess.Popen[bytes]]:
    """``count`` simulate_matches processes sharing ``rate``; returns once they all send.

    One Python process cannot offer 20,000 results/s while the consumers share its cores.
    """
    loaders = [
        subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "manage.py"),
                "simulate_matches",
                "--season",
                str(season_id),
                "--topic",
                topic,
                "--rate",
                f"{rate / count:.0f}",
                "--duration",
                str(seconds),
                "--players",
                str(players),
                "--seed",
                str(n),
                "--no-progress",
                *(["--boards", ",".join(boards), "--spread"] if len(boards) > 1 else []),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        for n in range(count)
    ]
    # Django start-up takes a while; the probes start when the load does.
    deadline = time.monotonic() + 60
    while loaders and time.monotonic() < deadline:
        if _topic_size(bootstrap, topic) > produced + count * 10:
            break
        time.sleep(0.1)
    return loaders


def _wait_loaders(loaders: list[subprocess.Popen[bytes]]) -> tuple[int, float]:
    """(messages the helper processes sent, their summed achieved rate)."""
    sent = 0
    rate = 0.0
    for loader in loaders:
        out, _ = loader.communicate(timeout=600)
        # "sent N messages in X.Ys (R/s): ..."
        words = out.decode().split("sent ", 1)[1].split()
        sent += int(words[0])
        rate += int(words[0]) / float(words[3].rstrip("s"))
    return sent, rate


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _listening_pids(ports: Iterable[int]) -> dict[int, int]:
    """port -> pid of the process listening on it (TCP, any address), from /proc.

    The services are found by their ports, not by process name: the machine may run other
    redis-servers and brokers (another checkout's, a test's private one) that are not this run's.
    """
    wanted = set(ports)
    inodes: dict[str, int] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            port = int(fields[1].rsplit(":", 1)[1], 16)
            if fields[3] == "0A" and port in wanted:  # 0A: LISTEN
                inodes[f"socket:[{fields[9]}]"] = port
    found: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            links = [os.readlink(fd) for fd in (entry / "fd").iterdir()]
        except OSError:
            continue  # gone meanwhile, or not ours to read
        for link in links:
            if link in inodes:
                found.setdefault(inodes[link], int(entry.name))
    return found


def _service_pids(report: Report) -> dict[int, tuple[str, str]]:
    """pid -> (kind, part) of this run's servers, found by their ports: kind "redis" or
    "kafka"; part "redis masters" / "redis replicas" on a Redis Cluster, else "". Labels what
    each kind sums in ``report.e2e_cpu_processes`` and notes a server it could not find."""
    client = get_board_redis()
    redis_ports: dict[int, str] = {}
    if isinstance(client, RedisCluster):
        for node in client.get_nodes():
            redis_ports[int(node.port)] = str(node.server_type)
    else:
        redis_ports[urlsplit(settings.REDIS_URL).port or 6379] = "primary"
    kafka_ports = {int(b.rsplit(":", 1)[1]) for b in settings.KAFKA_BOOTSTRAP_SERVERS}
    listening = _listening_pids([*redis_ports, *kafka_ports])
    cluster = isinstance(client, RedisCluster)
    pids: dict[int, tuple[str, str]] = {}
    for kind, ports in (("redis", sorted(redis_ports)), ("kafka", sorted(kafka_ports))):
        seen = [p for p in ports if p in listening]
        missing = [p for p in ports if p not in listening]
        for port in seen:
            part = ""
            if kind == "redis" and cluster:
                part = "redis masters" if redis_ports[port] == "primary" else "redis replicas"
            pids[listening[port]] = (kind, part)
        if kind == "redis":
            roles = [redis_ports[p] for p in seen]
            label = f"{len(seen)} redis-server ({', '.join(map(str, seen))}"
            if len(ports) > 1:
                label += f": {roles.count('primary')} masters, {roles.count('replica')} replicas"
            report.e2e_cpu_processes[kind] = label + ")"
        else:
            report.e2e_cpu_processes[kind] = (
                f"{len(seen)} broker{'s' * (len(seen) != 1)} ({', '.join(map(str, seen))})"
            )
        if missing:
            report.notes.append(
                f"{kind}: no process seen listening on {missing}: its CPU is not counted"
            )
    return pids


def _cpu_by_kind(
    consumer_pids: set[int], service_pids: dict[int, tuple[str, str]]
) -> tuple[dict[str, float], dict[str, float]]:
    """CPU seconds used so far by the consumers and by each kind of service, from /proc; and
    by each part of a kind (a cluster's Redis masters and replicas).

    PostgreSQL: the server's own processes (WAL writer, checkpointer...) and the backends of
    the bench's database, not other databases' backends (another test suite on the machine).
    """
    database = str(settings.DATABASES["default"]["NAME"])
    totals: dict[str, float] = {}
    parts: dict[str, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        seconds = (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime + stime
        pid = int(entry.name)
        if pid in consumer_pids:
            kind = "consumers"
        elif pid in service_pids:
            kind, part = service_pids[pid]
            if part:
                parts[part] = parts.get(part, 0.0) + seconds
        elif comm.startswith("postgres"):
            if not _postgres_counts(entry, database):
                continue
            kind = "postgresql"
        elif pid == os.getpid():
            kind = "bench process"
        else:
            continue
        totals[kind] = totals.get(kind, 0.0) + seconds
    return totals, parts


def _postgres_counts(entry: Path, database: str) -> bool:
    """Whether a PostgreSQL process is the server's own or a backend of ``database``: a
    backend's title is ``postgres: <user> <database> <host>(<port>) <state>``."""
    try:
        title = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    words = title.split()
    backend = (
        len(words) >= 4
        and words[0] == "postgres:"
        and (words[3].endswith(")") or words[3] == "[local]")
    )
    return not backend or words[2] == database


def _per_1000(before: dict[str, float], after: dict[str, float], results: int) -> dict[str, float]:
    """ms of CPU per 1,000 results between two samples, per key."""
    return {
        key: round((after[key] - before.get(key, 0.0)) * 1e6 / results, 1) for key in sorted(after)
    }


def _machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return (sum(values) - idle) / _CLOCK_TICKS, sum(values) / _CLOCK_TICKS


def _backlog_produce(*, topic: str, messages: list[MatchResultMessage], label: str) -> float:
    """Publish ``messages`` as fast as the producer goes, flushed; results/s."""
    with MatchResultProducer.from_settings(topic=topic, client_id="bench") as producer:

        def produce(bar: tqdm) -> None:
            for chunk in _chunks(messages, 5000):
                for message in chunk:
                    producer.send(message)
                bar.update(len(chunk))
            producer.flush(timeout=120)

        return _timed(label, len(messages), produce)


def _steady_rate(samples: list[tuple[float, int]], total: int) -> float:
    """Results/s from the poll that first saw a tenth of ``total`` applied to the last: the
    drain's pace once both consumers have joined (a rebalance at the start can pause every
    member for seconds, at random, which the first-progress rate carries)."""
    start = next(((t, n) for t, n in samples if n >= total // 10), None)
    end = samples[-1] if samples else None
    if start is None or end is None or end[0] <= start[0]:
        return 0.0
    return (end[1] - start[1]) / (end[0] - start[0])


def _consumers_start(
    *, topic: str, group: str, count: int, batch: int, name: str
) -> list[subprocess.Popen[bytes]]:
    """``count`` real ``manage.py consume_match_results`` processes in one group."""
    env = {**os.environ, "LOG_LEVEL": "INFO"}
    processes = []
    for n in range(count):
        log = (RESULTS_DIR / f"ingest-{RUN_TAG}-{name}{n}.log").open("wb")
        processes.append(
            subprocess.Popen(
                [
                    sys.executable,
                    str(ROOT / "manage.py"),
                    "consume_match_results",
                    "--topic",
                    topic,
                    "--dead-letter-topic",
                    f"{topic}.dlq",
                    "--group",
                    group,
                    "--max-poll-records",
                    str(batch),
                    "--stats-interval",
                    "5",
                ],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    return processes


def _consumers_stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def _bytes_per_player(client: BoardRedis, board_keys: list[str]) -> float:
    """MEMORY USAGE of a board's keys (its sorted set, and a wide board's index) over its
    players; SAMPLES 0 walks every element (exact, and slow only on huge boards)."""
    members = int(client.zcard(board_keys[0]))
    used = sum(int(client.memory_usage(key, samples=0) or 0) for key in board_keys)
    return round(used / members, 1) if members else 0.0


def _timed(label: str, total: int, fn: Callable[[tqdm], None]) -> float:
    with tqdm(total=total, desc=label, unit="res", leave=False) as bar:
        started = time.perf_counter()
        fn(bar)
        return total / (time.perf_counter() - started)


def _chunks(items: Sequence, size: int) -> list[Sequence]:
    return [items[i : i + size] for i in range(0, len(items), size)]


@dataclass
class Drain:
    """One more backlog drained to one board by fresh consumers of its own topic."""

    first_per_s: float  # from the first applied batch to the last
    steady_per_s: float  # from a tenth applied on (_steady_rate)
    cpu_ms_per_1000: dict[str, float]  # start-up included (as e2e_cpu_ms_per_1000)
    profile: Profile | None = None
    # From the first applied batch on (as e2e_cpu_after_startup_ms_per_1000): the consumers'
    # start-up (imports, a second or more of CPU each) left out.
    cpu_after_startup_ms_per_1000: dict[str, float] = field(default_factory=dict)


def _seat(board_id: int, players: set[int]) -> None:
    """Seat ``players`` on a tournament board at once (setup, not measured: joins one by one
    through the service would take minutes for a large backlog's players)."""
    Participant.objects.bulk_create(
        [Participant(board_id=board_id, player_id=p) for p in sorted(players)], batch_size=10_000
    )
    Board.objects.filter(id=board_id).update(participants=len(players))


def _board_drain(
    *,
    args: argparse.Namespace,
    topic: str,
    group: str,
    board_id: int,
    backlog: list[MatchResultMessage],
    every_board: Sequence[int],
    services: dict[int, tuple[str, str]],
    label: str,
    desc: str,
    cleanup: list[str] | None = None,
) -> Drain | None:
    """Drain ``backlog`` (all to ``board_id``) from a topic of its own, filled before its own
    consumers start: measured as the plain drain (a backlog already waiting, from the first
    applied batch to the last). None if it was not applied within the timeout."""
    if cleanup is not None:
        admin = KafkaAdminClient(bootstrap_servers=list(settings.KAFKA_BOOTSTRAP_SERVERS))
        configs = {"min.insync.replicas": str(settings.KAFKA_TOPIC_MIN_INSYNC_REPLICAS)}
        replicas = settings.KAFKA_TOPIC_REPLICATION_FACTOR
        admin.create_topics(
            [
                NewTopic(topic, args.partitions, replicas, topic_configs=configs),
                NewTopic(f"{topic}.dlq", 1, replicas, topic_configs=configs),
            ]
        )
        admin.close()
        cleanup += [topic, f"{topic}.dlq"]
    _backlog_produce(topic=topic, messages=backlog, label=f"produce {desc} backlog")
    # Nothing of the new topic is on any board yet: said in each board's watermark of it, as a
    # board created now says it (a missing watermark would send the consumers' start-up
    # recovery rebuilding every board of the run first, inside the drain).
    for each in every_board:
        watermark_raise(board_id=each, offsets={}, topic=topic)
    consumers = _consumers_start(
        topic=topic, group=group, count=args.consumers, batch=args.batch, name=f"{label}-consumer"
    )
    samples: list[tuple[float, int]] = []
    pids = {c.pid for c in consumers}
    cpu_before = _cpu_by_kind(pids, services)[0]
    profilers = _profilers_start(consumers, label=f"{label}-consumer") if args.profile else []
    profile = None
    at_first: list[tuple[int, dict[str, float]]] = []
    try:
        first, done = _wait_applied(
            topic,
            [board_id],
            len(backlog),
            timeout=args.timeout,
            desc=f"e2e drain, {desc}",
            on_first=lambda applied: at_first.append((applied, _cpu_by_kind(pids, services)[0])),
            samples=samples,
        )
        cpu_after = _cpu_by_kind(pids, services)[0]
        cpu = _per_1000(cpu_before, cpu_after, len(backlog))
        after_startup = (
            _per_1000(at_first[0][1], cpu_after, len(backlog) - at_first[0][0])
            if at_first and at_first[0][0] < len(backlog)
            else {}
        )
        if profilers:
            profile = _profilers_stop(profilers)
    finally:
        _consumers_stop(consumers)
    if done is None or first is None:
        return None
    return Drain(
        len(backlog) / (done - first),
        _steady_rate(samples, len(backlog)),
        cpu,
        profile,
        after_startup,
    )


def _changed_share(
    results: Sequence[MatchResultMessage], *, rule: str, values: dict[int, int]
) -> float:
    """The share of ``results`` that change their player's value on a ``desc`` board of
    ``rule`` (the results that emit rank events), from the players' ``values`` before them,
    which it updates: under ``best`` a player's first result or a higher one (an equal value
    reached later ranks below the earlier, so it changes nothing), under ``cumulative`` any."""
    changed = 0
    for m in results:
        before = values.get(m.player_id)
        if rule == "cumulative":
            values[m.player_id] = (before or 0) + m.points
            changed += m.points != 0 or before is None
        elif before is None or m.points > before:
            values[m.player_id] = m.points
            changed += 1
    return changed / len(results) if results else 0.0


def _outbox_left(board_id: int, topic: str, args: argparse.Namespace) -> int:
    """Entries left in a board's rank-events outboxes of ``topic``: events not published."""
    pipe = get_board_redis().pipeline(transaction=False)
    for partition in range(args.partitions):
        pipe.xlen(keys.rank_events_outbox(board_id=board_id, topic=topic, partition=partition))
    return sum(int(n) for n in pipe.execute())


class EventWatcher(threading.Thread):
    """Reads the rank-events topic from its end; records when each probe player's first event
    arrives (produce-to-event, beside ProbeWatcher's produce-to-visible)."""

    def __init__(self, *, topic: str, bootstrap: list[str]) -> None:
        super().__init__(daemon=True)
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
        self.partitions = [
            TopicPartition(topic, p) for p in self.consumer.partitions_for_topic(topic) or ()
        ]
        self.consumer.assign(self.partitions)
        self.consumer.seek_to_end(*self.partitions)
        for tp in self.partitions:
            self.consumer.position(tp)  # resolve the end now, before any probe is sent
        self.seen: dict[int, float] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for batch in self.consumer.poll(timeout_ms=50).values():
                now = time.monotonic()
                for record in batch:
                    player = int(record.key)
                    if player >= PROBE_BASE:
                        with self.lock:
                            self.seen.setdefault(player, now)
        self.consumer.close()

    def latency(self, sent: dict[int, float]) -> Latency:
        with self.lock:
            values = sorted((self.seen[p] - t) * 1000 for p, t in sent.items() if p in self.seen)
        return _latency(len(sent), values)


def _cpu_ratio_lines(report: Report) -> list[str]:
    """The drain without events against the one with, by CPU summed over the consumers and
    the services (the bench process left out: it only produces and watches)."""
    lines = []
    kinds = ("consumers", "redis", "kafka", "postgresql")
    for what, plain, evented in (
        ("start-up included", report.e2e_cpu_ms_per_1000, report.events_cpu_ms_per_1000),
        (
            "from the first applied batch on",
            report.e2e_cpu_after_startup_ms_per_1000,
            report.events_cpu_after_startup_ms_per_1000,
        ),
    ):
        without = sum(plain.get(k, 0.0) for k in kinds)
        with_events = sum(evented.get(k, 0.0) for k in kinds)
        if without and with_events:
            lines.append(
                f"- by CPU ({what}; consumers, Redis, Kafka and PostgreSQL summed): "
                f"{without:,.1f} against {with_events:,.1f} ms per 1,000 results, "
                f"{without / with_events:.2f}x"
            )
    return lines


def _latency(count: int, values: list[float]) -> Latency:
    if not values:
        return Latency(count, 0, None, None, None)
    p99 = values[min(len(values) - 1, round(0.99 * (len(values) - 1)))]
    return Latency(count, len(values), statistics.median(values), p99, values[-1])


# --- the run ---------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> Report:
    report = Report(started_at=datetime.now(UTC).isoformat(), args=vars(args))
    call_command("migrate", verbosity=0)
    bootstrap = list(settings.KAFKA_BOOTSTRAP_SERVERS)
    report.redis_mode = settings.LB_REDIS_MODE
    report.kafka_brokers = settings.LB_KAFKA_BROKERS
    report.services = _describe_services(get_board_redis(), bootstrap)
    topic = f"bench-ingest-{RUN_TAG}"
    wide_topic = f"{topic}-tiebreak"
    # --events: the second drain's input, and where every consumer of the run publishes rank
    # events (inherited from this process's environment).
    events_in_topic = f"{topic}-events"
    rank_events_topic = f"{topic}-rank-events"
    os.environ["KAFKA_RANK_EVENTS_TOPIC"] = rank_events_topic
    group = f"bench-{RUN_TAG}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="bench-admin")
    replicas = settings.KAFKA_TOPIC_REPLICATION_FACTOR
    configs = {"min.insync.replicas": str(settings.KAFKA_TOPIC_MIN_INSYNC_REPLICAS)}
    admin.create_topics(
        [
            NewTopic(topic, args.partitions, replicas, topic_configs=configs),
            NewTopic(f"{topic}.dlq", 1, replicas, topic_configs=configs),
            *(
                [
                    NewTopic(wide_topic, args.partitions, replicas, topic_configs=configs),
                    NewTopic(f"{wide_topic}.dlq", 1, replicas, topic_configs=configs),
                ]
                if args.tiebreak
                else []
            ),
            *(
                [
                    NewTopic(events_in_topic, args.partitions, replicas, topic_configs=configs),
                    NewTopic(f"{events_in_topic}.dlq", 1, replicas, topic_configs=configs),
                ]
                if args.events
                else []
            ),
            *(
                [NewTopic(rank_events_topic, args.partitions, replicas, topic_configs=configs)]
                if args.events or args.events_rounds
                else []
            ),
        ]
    )
    used = set(Season.objects.values_list("id", flat=True))
    e2e_id, ceiling_id = [n for n in range(990_001, 999_999) if n not in used][:2]
    now = datetime.now(UTC).replace(microsecond=0)
    seasons = {
        sid: season_setup(
            season_id=sid,
            name=f"bench {RUN_TAG}",
            starts_at=now - timedelta(days=1),
            ends_at=now + timedelta(days=30),
            rule=args.rule,
            # The baseline emits no rank events; --events drains a board that does beside it.
            rank_events=False,
        )
        for sid in (e2e_id, ceiling_id)
    }
    # The end-to-end season's boards, main first (--boards 3: one asc best, one latest).
    extra = [
        ("asc-best", BoardOrder.ASC, ScoringRule.BEST),
        ("latest", BoardOrder.DESC, ScoringRule.LATEST),
    ]
    e2e_slugs = [MAIN_BOARD]
    e2e_boards = [main_board_get(season_id=e2e_id).id]
    for slug, order, rule in extra[: args.boards - 1]:
        created = board_create(
            season_id=e2e_id, slug=slug, name=slug, order=order, rule=rule, rank_events=False
        )
        e2e_slugs.append(slug)
        e2e_boards.append(created.id)
    tiebreak_columns = [
        TiebreakColumn(name, order)
        for name, order in (("kills", "desc"), ("deaths", "asc"), ("assists", "desc"))
    ][: args.tiebreak]
    tiebreak_board = (
        board_create(
            season_id=e2e_id,
            slug="tiebreak",
            name="tiebreak",
            tiebreaks=tiebreak_columns,
            rank_events=False,
        ).id
        if tiebreak_columns
        else None
    )
    # --events: main's spec, and rank events on (the default top 100).
    events_boards = (
        [board_create(season_id=e2e_id, slug="events", name="events", rule=args.rule).id]
        if args.events
        else []
    )
    # --cohort-size: two more boards of the season, the same but for cohorts.
    # Rounds alternate which runs first (off, on; then on, off; ...): a trend in the machine's
    # load over the run weighs on both alike.
    cohort_boards: dict[str, int] = {}
    for round_number in range(1, args.cohort_rounds + 1 if args.cohort_size else 1):
        pair = [(f"off-{round_number}", None), (f"on-{round_number}", args.cohort_size)]
        for slug, size in pair if round_number % 2 else reversed(pair):
            cohort_boards[slug] = board_create(
                season_id=e2e_id, slug=slug, name=slug, cohort_size=size, rank_events=False
            ).id
    # --tiebreak-rounds: pairs of fresh boards, plain and with the columns, alternating as above.
    tiebreak_pairs: dict[str, int] = {}
    for round_number in range(1, args.tiebreak_rounds + 1 if tiebreak_columns else 1):
        wide_pair = [(f"narrow-{round_number}", ()), (f"wide-{round_number}", tiebreak_columns)]
        for slug, columns in wide_pair if round_number % 2 else reversed(wide_pair):
            tiebreak_pairs[slug] = board_create(
                season_id=e2e_id, slug=slug, name=slug, tiebreaks=columns, rank_events=False
            ).id
    # --tournament: two more boards of the season a round, plain and a tournament.
    tournament_boards: dict[str, int] = {}
    for round_number in range(1, args.tournament_rounds + 1 if args.tournament else 1):
        plain = {"join_required": False, "max_attempts": None}
        cup = {"join_required": True, "max_attempts": args.tournament_attempts}
        pair = [(f"plain-{round_number}", plain), (f"tournament-{round_number}", cup)]
        for slug, options in pair if round_number % 2 else reversed(pair):
            tournament_boards[slug] = board_create(
                season_id=e2e_id,
                slug=slug,
                name=slug,
                rank_events=False,
                **options,
            ).id
    # --events-rounds: pairs of fresh boards of main's spec, rank events off and on (the
    # default top 100), alternating which runs first as above.
    events_pairs: dict[str, int] = {}
    for round_number in range(1, args.events_rounds + 1):
        events_pair = [(f"events-off-{round_number}", False), (f"events-on-{round_number}", True)]
        for slug, emits in events_pair if round_number % 2 else reversed(events_pair):
            events_pairs[slug] = board_create(
                season_id=e2e_id, slug=slug, name=slug, rule=args.rule, rank_events=emits
            ).id
    extra_topics: list[str] = []
    ceiling_board = main_board_get(season_id=ceiling_id)
    # Every board of the run: each drain's topic gets an empty watermark on each of them.
    run_boards = (
        *e2e_boards,
        *([tiebreak_board] if tiebreak_board is not None else []),
        ceiling_board.id,
        *events_boards,
        *cohort_boards.values(),
        *tiebreak_pairs.values(),
        *tournament_boards.values(),
        *events_pairs.values(),
    )
    consumers: list[subprocess.Popen[bytes]] = []
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    try:
        # --- backlog, and the Kafka consume-only ceiling --------------------------------------
        results = Results(season_id=e2e_id, players=args.players, seed=1, boards=e2e_slugs)
        backlog = [results.one() for _ in range(args.backlog)]
        report.produce_backlog_per_s = _backlog_produce(
            topic=topic, messages=backlog, label="produce backlog"
        )

        def consume_only(bar: tqdm) -> None:
            consumer = KafkaConsumer(
                topic,
                bootstrap_servers=bootstrap,
                group_id=None,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                max_poll_records=args.batch,
                fetch_max_bytes=52_428_800,
                max_partition_fetch_bytes=8_388_608,
            )
            seen = 0
            while seen < len(backlog):
                for batch in consumer.poll(timeout_ms=500, max_records=args.batch).values():
                    seen += len(batch)
                    bar.update(len(batch))
            consumer.close()

        report.kafka_consume_only_per_s = _timed("kafka consume-only", len(backlog), consume_only)

        # --- PostgreSQL insert-only and Redis apply-only ceilings (another season) -----------
        ceiling_results = Results(season_id=ceiling_id, players=args.players, seed=2)
        ceiling = [
            ResultRow(
                m.match_id,
                m.player_id,
                m.season_id,
                ceiling_board.id,
                m.points,
                m.achieved_at,
                n % args.partitions,
                n // args.partitions,
            )
            for n, m in ((n, ceiling_results.one()) for n in range(args.ceiling_rows))
        ]

        ceiling_chunks = [ResultColumns.of(chunk) for chunk in _chunks(ceiling, args.batch)]

        def pg_only(bar: tqdm) -> None:
            for chunk in ceiling_chunks:
                match_results_store(results=chunk)
                bar.update(len(chunk))

        report.pg_insert_only_per_s = _timed("postgres insert-only", len(ceiling), pg_only)

        codec = ceiling_board.codec
        counted = [
            CountedResult(
                partition=v.kafka_partition,
                offset=v.kafka_offset,
                board_id=ceiling_board.id,
                player_id=v.player_id,
                points=v.points,
                ticks=codec.ticks(v.achieved_at - seasons[ceiling_id].starts_at),
                day=v.achieved_at.date(),
                xid=1,
            )
            for v in ceiling
        ]

        # The columns the consumer hands over, made before the clock starts.
        batches = []
        for chunk in _chunks(counted, args.batch):
            handled: dict[int, int] = {}
            for c in chunk:
                handled[c.partition] = max(handled.get(c.partition, -1), c.offset)
            batches.append((counted_groups(chunk), handled, len(chunk)))

        def redis_only(bar: tqdm) -> None:
            for groups, handled, size in batches:
                board_groups_apply(
                    topic=f"{topic}-ceiling",
                    groups=groups,
                    handled_offsets=handled,
                    boards={ceiling_board.id: ceiling_board},
                )
                bar.update(size)

        services = _service_pids(report)
        (cpu_before, parts_before) = _cpu_by_kind(set(), services)
        report.redis_apply_only_per_s = _timed("redis apply-only", len(counted), redis_only)
        (cpu_after, parts_after) = _cpu_by_kind(set(), services)
        apply_cpu = _per_1000(cpu_before, cpu_after, len(counted))
        report.redis_apply_only_cpu_ms_per_1000 = {
            "bench process (client)": apply_cpu.get("bench process", 0.0),
            "redis": apply_cpu.get("redis", 0.0),
            **_per_1000(parts_before, parts_after, len(counted)),
        }

        # --- end to end: drain the backlog with real consumer processes ----------------------
        started = time.monotonic()
        consumers += _consumers_start(
            topic=topic, group=group, count=args.consumers, batch=args.batch, name="consumer"
        )
        pids = {c.pid for c in consumers}
        profilers = _profilers_start(consumers) if args.profile else []
        # From here to the end of the drain (start-up included, which the consumers' share
        # carries: about a second of imports each).
        (cpu_before, parts_before), busy_before = _cpu_by_kind(pids, services), _machine_busy()
        at_first: list[tuple[int, dict[str, float]]] = []
        plain_samples: list[tuple[float, int]] = []
        first, done = _wait_applied(
            topic,
            e2e_boards,
            len(backlog),
            timeout=args.timeout,
            desc="e2e drain",
            on_first=lambda applied: at_first.append((applied, _cpu_by_kind(pids, services)[0])),
            samples=plain_samples,
        )
        (cpu_after, parts_after), busy_after = _cpu_by_kind(pids, services), _machine_busy()
        if profilers:
            report.e2e_profile = _profilers_stop(profilers)
        if done is None or first is None:
            report.notes.append("the consumers did not apply the backlog within the timeout")
            return report
        report.e2e_drain_per_s = len(backlog) / (done - first)
        report.e2e_drain_incl_startup_per_s = len(backlog) / (done - started)
        report.e2e_cpu_ms_per_1000 = _per_1000(cpu_before, cpu_after, len(backlog))
        if at_first and at_first[0][0] < len(backlog):
            applied, cpu_first = at_first[0]
            report.e2e_cpu_after_startup_ms_per_1000 = _per_1000(
                cpu_first, cpu_after, len(backlog) - applied
            )
        report.e2e_cpu_parts_ms_per_1000 = _per_1000(parts_before, parts_after, len(backlog))
        busy = busy_after[0] - busy_before[0]
        client = get_board_redis()
        report.e2e_board_players = {
            slug: int(client.zcard(keys.board(board_id=board_id)))
            for slug, board_id in zip(e2e_slugs, e2e_boards, strict=True)
        }
        report.e2e_cpu_busy_share = round(busy / max(busy_after[1] - busy_before[1], 1e-9), 3)
        produced = len(backlog)

        # --- --tiebreak: the same drain to a board with tie-break columns --------------------
        if tiebreak_board is not None:
            wide = Results(
                season_id=e2e_id,
                players=args.players,
                seed=2,
                boards=["tiebreak"],
                tiebreaks=[c.name for c in tiebreak_columns],
            )
            drain_of = _board_drain(
                args=args,
                topic=wide_topic,
                group=f"{group}-tiebreak",
                board_id=tiebreak_board,
                backlog=[wide.one() for _ in range(args.backlog)],
                every_board=run_boards,
                services=services,
                label="tiebreak",
                desc=f"{args.tiebreak} tie-break columns",
            )
            if drain_of is None:
                report.notes.append("the consumers did not apply the tie-break backlog in time")
            else:
                report.tiebreak_drain_per_s = drain_of.first_per_s
                report.tiebreak_steady_drain_per_s = drain_of.steady_per_s
                report.tiebreak_cpu_ms_per_1000 = drain_of.cpu_ms_per_1000
                report.tiebreak_profile = drain_of.profile
                report.plain_steady_drain_per_s = _steady_rate(plain_samples, len(backlog))
            plain_key = keys.board(board_id=e2e_boards[0])
            wide_key = keys.board(board_id=tiebreak_board)
            report.redis_bytes_per_player = {
                "plain": _bytes_per_player(client, [plain_key]),
                f"{args.tiebreak} tie-break columns": _bytes_per_player(
                    client, [wide_key, keys.board_index(board_key=wide_key)]
                ),
            }

        # --- --events: the same drain to a board of the same spec that emits rank events -----
        if args.events:
            evented = Results(season_id=e2e_id, players=args.players, seed=1, boards=["events"])
            events_drain = _board_drain(
                args=args,
                topic=events_in_topic,
                group=f"{group}-events",
                label="events",
                backlog=[evented.one() for _ in range(args.backlog)],
                board_id=events_boards[0],
                every_board=run_boards,
                services=services,
                desc="rank events",
            )
            if events_drain is None:
                report.notes.append("the consumers did not apply the events backlog in time")
            else:
                report.events_drain_per_s = events_drain.first_per_s
                report.events_steady_drain_per_s = events_drain.steady_per_s
                report.events_cpu_ms_per_1000 = events_drain.cpu_ms_per_1000
                report.events_cpu_after_startup_ms_per_1000 = (
                    events_drain.cpu_after_startup_ms_per_1000
                )
                report.events_profile = events_drain.profile
                report.plain_steady_drain_per_s = _steady_rate(plain_samples, len(backlog))
                report.events_published = _topic_size(bootstrap, rank_events_topic)
            # From here on the main board emits too: the steady phase's probes measure
            # produce-to-event beside produce-to-visible.
            Board.objects.filter(id=e2e_boards[0]).update(rank_events=True)

        def paired_drain(
            slug: str,
            board_id: int,
            backlog_of: list[MatchResultMessage],
            *,
            into: dict[str, dict[str, object]],
            phase: str = "",
        ) -> dict[str, object] | None:
            """One drain of a pair of the rounds (--cohort-rounds, --tiebreak-rounds,
            --tournament-rounds, --events-rounds), from a topic of its own, into the report's
            drains ``into`` (and returned); ``phase`` (a board's warm-up or measured drain, when
            a board has two) joins the slug in the names of the drain's topic and group."""
            name = f"{slug}-{phase}" if phase else slug
            drain_of = _board_drain(
                args=args,
                topic=f"{topic}-{name}",
                group=f"{group}-{name}",
                board_id=board_id,
                backlog=backlog_of,
                every_board=run_boards,
                services=services,
                label=name,
                desc=name,
                cleanup=extra_topics,
            )
            if drain_of is None:
                report.notes.append(f"the consumers did not apply the {name} backlog in time")
                return None
            into[slug] = asdict(drain_of)
            return into[slug]

        # --- --cohort-size: the same drain to a board without, then one with cohorts ---------
        for slug, board_id in cohort_boards.items():
            # The same results (one seed a round) under each board's slug: most are a player's
            # first on the board, the case where a board with cohorts assigns one.
            seed = 3 + int(slug.rsplit("-", 1)[1])
            same = Results(
                season_id=e2e_id,
                players=args.cohort_players or args.players,
                seed=seed,
                boards=[slug],
            )
            cohort_backlog = [same.one() for _ in range(args.backlog)]
            report.cohort_first_share = len({m.player_id for m in cohort_backlog}) / len(
                cohort_backlog
            )
            paired_drain(slug, board_id, cohort_backlog, into=report.cohort_drains)

        # --- --tiebreak-rounds: the same results to a plain board and to a tie-break one -----
        wide_backlogs: dict[str, list[MatchResultMessage]] = {}
        for slug, board_id in tiebreak_pairs.items():
            number = slug.rsplit("-", 1)[1]
            if number not in wide_backlogs:
                # One backlog a round, with tie-break values; the plain board gets it without
                # them: the same players, points and order on both boards.
                wide = Results(
                    season_id=e2e_id,
                    players=args.players,
                    seed=10 + int(number),
                    tiebreaks=[c.name for c in tiebreak_columns],
                )
                wide_backlogs[number] = [wide.one() for _ in range(args.backlog)]
            backlog_of = [
                msgspec.structs.replace(
                    m, board=slug, tiebreakers=m.tiebreakers if slug.startswith("wide") else None
                )
                for m in wide_backlogs[number]
            ]
            paired_drain(slug, board_id, backlog_of, into=report.tiebreak_drains)

        # --- --tournament: the same drain to a plain board and to a tournament board ---------
        for slug, board_id in tournament_boards.items():
            seed = 100 + int(slug.rsplit("-", 1)[1])
            same = Results(season_id=e2e_id, players=args.players, seed=seed, boards=[slug])
            tournament_backlog = [same.one() for _ in range(args.backlog)]
            if slug.startswith("tournament-"):
                _seat(board_id, {m.player_id for m in tournament_backlog})
            paired_drain(slug, board_id, tournament_backlog, into=report.tournament_drains)

        # --- --events-rounds: warmed boards, rank events off and on --------------------------
        for events_round in range(1, args.events_rounds + 1):
            # One warm-up backlog and one measured backlog a round, the same on both boards:
            # after the warm-up every player has a standing (each one the draw missed gets a
            # result), so most measured results beat nothing.
            players = args.events_players
            warm = Results(season_id=e2e_id, players=players, seed=200 + events_round)
            warmup = [warm.one() for _ in range(args.backlog)]
            drawn = {m.player_id for m in warmup}
            warmup += [warm.one_of(p) for p in range(1, players + 1) if p not in drawn]
            later = Results(season_id=e2e_id, players=players, seed=300 + events_round)
            measured = [later.one() for _ in range(args.backlog)]
            values: dict[int, int] = {}
            warmup_changed = _changed_share(warmup, rule=args.rule, values=values)
            measured_changed = _changed_share(measured, rule=args.rule, values=values)
            slugs = [s for s in events_pairs if s.rsplit("-", 1)[1] == str(events_round)]
            for events_phase, backlog_of, into, changed in (
                ("warmup", warmup, report.events_warmup_drains, warmup_changed),
                ("measured", measured, report.events_round_drains, measured_changed),
            ):
                for slug in slugs:
                    published = _topic_size(bootstrap, rank_events_topic)
                    drain_fields = paired_drain(
                        slug,
                        events_pairs[slug],
                        [msgspec.structs.replace(m, board=slug) for m in backlog_of],
                        into=into,
                        phase=events_phase,
                    )
                    if drain_fields is None:
                        continue
                    # The consumers finished their last batch (its events published) before
                    # they exited: whatever the board's outbox still holds was not counted.
                    left = _outbox_left(events_pairs[slug], f"{topic}-{slug}-{events_phase}", args)
                    if left:
                        report.notes.append(
                            f"{slug} {events_phase}: {left} outbox entries unpublished"
                        )
                    drain_fields["results"] = len(backlog_of)
                    drain_fields["changed_share"] = changed
                    drain_fields["events_published"] = (
                        _topic_size(bootstrap, rank_events_topic) - published
                    )

        # --- steady and burst: produce-to-visible latency ------------------------------------
        board = keys.board(board_id=main_board_get(season_id=e2e_id).id)
        for phase, rate, seconds in (
            ("steady", args.steady_rate, args.steady_seconds),
            ("burst", args.burst_rate, args.burst_seconds),
        ):
            if seconds <= 0:
                continue
            watcher = ProbeWatcher(board)
            watcher.start()
            event_watcher = (
                EventWatcher(topic=rank_events_topic, bootstrap=bootstrap) if args.events else None
            )
            if event_watcher is not None:
                event_watcher.start()
            java = phase == "burst" and args.burst_producer == "java"
            helpers = args.burst_producers if phase == "burst" and not java else 0
            loaders = _start_loaders(
                count=helpers,
                season_id=e2e_id,
                topic=topic,
                rate=rate * (1 - 1 / args.probe_every),
                seconds=seconds,
                players=args.players,
                bootstrap=bootstrap,
                produced=produced,
                boards=e2e_slugs,
            )
            if java:
                line_producer = JavaLineProducer(
                    topic=topic,
                    bootstrap=bootstrap,
                    log=RESULTS_DIR / f"ingest-{RUN_TAG}-console-producer.log",
                )
                # The JVM's start-up is not part of the burst: one probe, seen arriving.
                line_producer.send(results.probe())
                line_producer.pump()
                produced += 1
                deadline = time.monotonic() + 60
                while _topic_size(bootstrap, topic) < produced and time.monotonic() < deadline:
                    time.sleep(0.1)
                sent, achieved = _paced_produce(
                    line_producer,
                    results,
                    rate=rate,
                    seconds=seconds,
                    probe_every=args.probe_every,
                    watcher=watcher,
                    desc=f"{phase} {rate:.0f}/s (Java console producer)",
                )
            else:
                with MatchResultProducer.from_settings(topic=topic, client_id="bench") as producer:
                    sent, achieved = _paced_produce(
                        producer,
                        results,
                        # With helper processes this one sends the probes only.
                        rate=rate / args.probe_every if loaders else rate,
                        seconds=seconds,
                        probe_every=1 if loaders else args.probe_every,
                        watcher=watcher,
                        desc=f"{phase} {rate:.0f}/s" + (" (probes)" if loaders else ""),
                    )
            loaded, loaded_rate = _wait_loaders(loaders)
            sent += loaded
            achieved += loaded_rate
            ended = time.monotonic()
            produced += sent
            _, drained = _wait_applied(
                topic, e2e_boards, produced, timeout=args.timeout, desc=f"{phase} drain"
            )
            deadline = time.monotonic() + 10
            while not watcher.all_seen() and time.monotonic() < deadline:
                time.sleep(0.02)
            if event_watcher is not None:
                with watcher.lock:
                    sent_at = dict(watcher.sent)
                while len(event_watcher.seen) < len(sent_at) and time.monotonic() < deadline + 10:
                    time.sleep(0.02)
                event_watcher.stop.set()
                event_watcher.join()
            watcher.stop.set()
            watcher.join()
            event_latency = None if event_watcher is None else event_watcher.latency(sent_at)
            if phase == "steady":
                report.steady_rate_achieved_per_s = achieved
                report.steady_latency = watcher.latency()
                report.steady_event_latency = event_latency
            else:
                report.burst_rate_achieved_per_s = achieved
                report.burst_latency = watcher.latency()
                report.burst_event_latency = event_latency
                report.burst_drain_after_end_s = None if drained is None else drained - ended
        return report
    finally:
        _consumers_stop(consumers)
        wide_topics = [wide_topic, f"{wide_topic}.dlq"] if args.tiebreak else []
        events_topics = [events_in_topic, f"{events_in_topic}.dlq"] if args.events else []
        if args.events or args.events_rounds:
            events_topics.append(rank_events_topic)
        _cleanup(
            admin,
            [topic, f"{topic}.dlq", *wide_topics, *events_topics, *extra_topics],
            list(seasons),
        )


# --- profiling (--profile) --------------------------------------------------------------------

PROFILE_RATE = 250  # py-spy samples per second and consumer


def _profilers_start(
    consumers: Sequence[subprocess.Popen[bytes]], *, label: str = "consumer"
) -> list[tuple[Path, subprocess.Popen[bytes]]]:
    """One ``py-spy record`` per consumer process, attached by pid, until ``_profilers_stop``.

    Samples only the thread holding the GIL (``--gil``: the Python work, not the waits on
    sockets) without pausing the process (``--nonblocking``); the output is py-spy's "raw"
    format, collapsed stacks, which flamegraph.pl or speedscope.app also read.
    """
    spy = Path(sys.executable).with_name("py-spy")
    if not spy.exists():
        raise RuntimeError(f"--profile needs py-spy ({spy}): pip install -e '.[dev]'")
    profilers = []
    for n, consumer in enumerate(consumers):
        out = RESULTS_DIR / f"ingest-{RUN_TAG}-{label}{n}.pyspy.txt"
        log = (RESULTS_DIR / f"ingest-{RUN_TAG}-{label}{n}.pyspy.log").open("wb")
        command = [str(spy), "record", "--pid", str(consumer.pid), "--rate", str(PROFILE_RATE)]
        command += ["--gil", "--nonblocking", "--format", "raw", "--output", str(out)]
        profilers.append((out, subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)))
    return profilers


def _profilers_stop(profilers: list[tuple[Path, subprocess.Popen[bytes]]]) -> Profile:
    """Stop the profilers (SIGINT: py-spy writes its file) and sum their samples."""
    for _, process in profilers:
        process.send_signal(signal.SIGINT)
    for _, process in profilers:
        process.wait(timeout=60)
    stacks: dict[str, int] = {}
    for out, _ in profilers:
        if not out.exists():
            continue
        for line in out.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if stack:
                stacks[stack] = stacks.get(stack, 0) + int(count)
    profile = profile_summary(stacks)
    profile.files = [str(out.relative_to(ROOT)) for out, _ in profilers]
    return profile


def profile_summary(stacks: dict[str, int], *, top: int = 15) -> Profile:
    """Shares of the samples per function (``name (file)``, lines merged) from collapsed stacks:
    its own ("self": the innermost frame) and including its callees ("total")."""
    total = sum(stacks.values())
    own: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    for stack, count in stacks.items():
        frames = [_frame_name(frame) for frame in stack.split(";")]
        own[frames[-1]] = own.get(frames[-1], 0) + count
        for frame in set(frames):
            inclusive[frame] = inclusive.get(frame, 0) + count

    def ranked(counts: dict[str, int]) -> list[tuple[str, float]]:
        best = sorted(counts.items(), key=lambda item: -item[1])[:top]
        return [(name, round(100 * n / max(total, 1), 1)) for name, n in best]

    return Profile(samples=total, self_percent=ranked(own), total_percent=ranked(inclusive))


def _frame_name(frame: str) -> str:
    """``func (path/to/file.py:12)`` -> ``func (file.py)``: one entry per function."""
    name, _, where = frame.partition(" (")
    path = where.rsplit(":", 1)[0].rstrip(")")
    return f"{name} ({'/'.join(Path(path).parts[-2:])})" if path else name


def _describe_services(client: BoardRedis, bootstrap: list[str]) -> dict[str, str]:
    """What the run's boards and topics live on, for the report's heading."""
    if isinstance(client, RedisCluster):
        nodes = client.get_nodes()
        masters = sum(1 for n in nodes if n.server_type == "primary")
        redis_text = (
            f"Redis Cluster, {masters} masters + {len(nodes) - masters} replicas "
            f"({', '.join(sorted(n.name for n in nodes))})"
        )
    else:
        url = urlsplit(settings.REDIS_URL)
        redis_text = f"one Redis ({url.hostname}:{url.port or 6379}{url.path})"
    kafka_text = (
        f"{len(bootstrap)} Kafka broker{'s' * (len(bootstrap) != 1)} ({', '.join(bootstrap)}), "
        f"topics with replication factor {settings.KAFKA_TOPIC_REPLICATION_FACTOR}, "
        f"min.insync.replicas {settings.KAFKA_TOPIC_MIN_INSYNC_REPLICAS}"
    )
    return {"redis": redis_text, "kafka": kafka_text}


def _cleanup(admin: KafkaAdminClient, topics: list[str], season_ids: list[int]) -> None:
    try:
        admin.delete_topics(topics)
    finally:
        admin.close()
    MatchResult.objects.filter(season_id__in=season_ids).delete()
    Season.objects.filter(id__in=season_ids).delete()
    # The deleted rows are the next run's dead tuples otherwise: autovacuum would clean them up
    # in the middle of its drains (this database is the bench's own).
    print("vacuuming the bench's tables ...", flush=True)
    with connection.cursor() as cursor:
        for model in (MatchResult, CohortMember, Participant, RefusedResult):
            cursor.execute(f"VACUUM ANALYZE {model._meta.db_table}")
    # This run's prefix only. On a cluster, scan_iter walks every master (redis-py sends SCAN to
    # all primaries), and one UNLINK per key keeps each command within one slot.
    client = get_board_redis()
    pipe = client.pipeline(transaction=False)
    for key in client.scan_iter(match=f"{settings.LEADERBOARD_KEY_PREFIX}:*", count=1000):
        pipe.unlink(key)
        if len(pipe) >= 500:
            pipe.execute()
    pipe.execute()


def args_backlog(report: Report) -> int:
    return int(str(report.args.get("backlog", 0)))


def _fmt(value: float | None, unit: str = "") -> str:
    return "n/a" if value is None else f"{value:,.0f}{unit}"


def _percent(share: float | None) -> float | None:
    return None if share is None else share * 100


def _profile_of(drain: dict[str, object]) -> Profile | None:
    raw = drain.get("profile")
    return Profile(**raw) if isinstance(raw, dict) else None


def render(report: Report) -> str:
    e2e = report.e2e_drain_per_s

    def ratio(ceiling: float) -> str:
        return f"{e2e / ceiling:.2f}" if ceiling and e2e else "n/a"

    both = report.redis_mode == "cluster" and report.kafka_brokers == 3
    mode = (
        "cluster mode"
        if both
        else "single-node mode"
        if report.redis_mode == "single" and report.kafka_brokers == 1
        else f"mixed mode (Redis {report.redis_mode}, {report.kafka_brokers} Kafka brokers)"
    )
    lines = [
        f"Ingestion benchmark, {mode}, {report.started_at}",
        *(f"{name}: {text}" for name, text in report.services.items()),
        f"args: {json.dumps(report.args, default=str)}",
        "",
        "| measurement | results/s | end-to-end / this |",
        "| --- | ---: | ---: |",
        f"| end-to-end drain (apply rate, after consumer start-up) | {_fmt(e2e)} | 1.00 |",
        f"| end-to-end drain including process start-up | "
        f"{_fmt(report.e2e_drain_incl_startup_per_s)} | |",
        f"| ceiling: Kafka consume-only (kafka-python) | {_fmt(report.kafka_consume_only_per_s)} "
        f"| {ratio(report.kafka_consume_only_per_s)} |",
        f"| ceiling: PostgreSQL bulk insert only | {_fmt(report.pg_insert_only_per_s)} "
        f"| {ratio(report.pg_insert_only_per_s)} |",
        f"| ceiling: Redis pipelined apply script only | {_fmt(report.redis_apply_only_per_s)} "
        f"| {ratio(report.redis_apply_only_per_s)} |",
        f"| (producer, backlog as fast as possible) | {_fmt(report.produce_backlog_per_s)} | |",
        "",
        "| phase | produced/s | probes seen | p50 | p99 | max |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, achieved, latency in (
        ("steady", report.steady_rate_achieved_per_s, report.steady_latency),
        ("burst", report.burst_rate_achieved_per_s, report.burst_latency),
    ):
        if latency is None:
            continue
        lines.append(
            f"| {name} | {_fmt(achieved)} | {latency.seen}/{latency.count} | "
            f"{_fmt(latency.p50_ms, ' ms')} | {_fmt(latency.p99_ms, ' ms')} | "
            f"{_fmt(latency.max_ms, ' ms')} |"
        )
    if report.burst_drain_after_end_s is not None:
        lines.append(f"\nlag drained {report.burst_drain_after_end_s:.1f} s after the burst ended")
    if report.e2e_cpu_ms_per_1000:
        lines += [
            "",
            "CPU during the end-to-end drain (ms of CPU per 1,000 results applied; "
            f"machine busy {report.e2e_cpu_busy_share:.0%} of its CPU time):",
            *(
                f"- {kind}: {ms:,.1f}"
                + (
                    f" ({report.e2e_cpu_processes[kind]})"
                    if kind in report.e2e_cpu_processes
                    else ""
                )
                for kind, ms in report.e2e_cpu_ms_per_1000.items()
            ),
            *(
                f"  - of which {part}: {ms:,.1f}"
                for part, ms in report.e2e_cpu_parts_ms_per_1000.items()
            ),
        ]
    if report.e2e_cpu_after_startup_ms_per_1000:
        lines += [
            "",
            "The same from the first applied batch on (the consumers' start-up left out):",
            *(
                f"- {kind}: {ms:,.1f}"
                for kind, ms in report.e2e_cpu_after_startup_ms_per_1000.items()
            ),
        ]
    if report.redis_apply_only_cpu_ms_per_1000:
        lines += [
            "",
            "CPU during the Redis apply-only ceiling (ms per 1,000 results):",
            *(f"- {k}: {ms:,.1f}" for k, ms in report.redis_apply_only_cpu_ms_per_1000.items()),
        ]
    cohort_profiles = [
        (f"{slug} drain", _profile_of(measured))
        for slug, measured in (
            report.cohort_drains
            | report.tiebreak_drains
            | report.tournament_drains
            | report.events_round_drains
        ).items()
    ] + [
        (f"{slug} warm-up drain", _profile_of(warmup))
        for slug, warmup in report.events_warmup_drains.items()
    ]
    for drain, profile in (
        ("drain", report.e2e_profile),
        ("tie-break drain", report.tiebreak_profile),
        ("drain with rank events", report.events_profile),
        *cohort_profiles,
    ):
        if profile is None:
            continue
        lines += [
            "",
            f"py-spy profile of the consumers over the {drain} ({profile.samples} samples "
            f"at {PROFILE_RATE}/s; the profiler's own CPU is not in the figures above, but it "
            "slows the consumers: compare CPU per result on runs without --profile):",
            "- own time (innermost frame):",
            *(f"  - {pct:.1f}% {name}" for name, pct in profile.self_percent),
            "- including callees:",
            *(f"  - {pct:.1f}% {name}" for name, pct in profile.total_percent),
            *(f"- raw stacks: {path}" for path in profile.files),
        ]
    if report.e2e_board_players:
        players = ", ".join(f"{slug} {n:,}" for slug, n in report.e2e_board_players.items())
        lines.append(f"\nplayers on the end-to-end boards after the drain: {players}")
    if report.tiebreak_drain_per_s and e2e:
        plain, wide = report.plain_steady_drain_per_s, report.tiebreak_steady_drain_per_s
        lines += [
            "",
            f"end-to-end drain to a board with {report.args.get('tiebreak')} tie-break columns "
            "(its own topic and consumers, as many results):",
            f"- from the first applied batch: {_fmt(report.tiebreak_drain_per_s)} results/s, "
            f"{report.tiebreak_drain_per_s / e2e:.2f}x the plain drain above",
            f"- from a tenth applied on (both drains): {_fmt(wide)} against {_fmt(plain)} "
            f"results/s, {wide / plain if plain else 0:.2f}x",
            "- CPU over it (ms per 1,000 results, start-up included; the plain drain's above): "
            + ", ".join(f"{k} {ms:,.1f}" for k, ms in report.tiebreak_cpu_ms_per_1000.items()),
        ]
    if report.events_drain_per_s and e2e:
        plain, evented = report.plain_steady_drain_per_s, report.events_steady_drain_per_s
        lines += [
            "",
            "end-to-end drain to a board of the same spec that emits rank events (its own topic "
            "and consumers, as many results; the boards above emit none):",
            f"- from the first applied batch: {_fmt(report.events_drain_per_s)} results/s, "
            f"{report.events_drain_per_s / e2e:.2f}x the drain without events above",
            f"- from a tenth applied on (both drains): {_fmt(evented)} against {_fmt(plain)} "
            f"results/s, {evented / plain if plain else 0:.2f}x",
            f"- rank events published: {report.events_published:,} "
            f"({report.events_published / max(1, args_backlog(report)):.2f} per result)",
            "- CPU over it (ms per 1,000 results, start-up included; the plain drain's above): "
            + ", ".join(f"{k} {ms:,.1f}" for k, ms in report.events_cpu_ms_per_1000.items()),
        ]
        if report.events_cpu_after_startup_ms_per_1000:
            lines.append(
                "- the same from the first applied batch on (the consumers' start-up left out; "
                "the plain drain's above): "
                + ", ".join(
                    f"{k} {ms:,.1f}"
                    for k, ms in report.events_cpu_after_startup_ms_per_1000.items()
                )
            )
        lines += _cpu_ratio_lines(report)
    for name, latency in (
        ("steady", report.steady_event_latency),
        ("burst", report.burst_event_latency),
    ):
        if latency is not None:
            lines.append(
                f"produce-to-event ({name}, a probe's personal_best read back from the "
                f"rank-events topic): {latency.seen}/{latency.count} seen, p50 "
                f"{_fmt(latency.p50_ms, ' ms')}, p99 {_fmt(latency.p99_ms, ' ms')}, max "
                f"{_fmt(latency.max_ms, ' ms')}"
            )
    lines += _pairs_table(
        report.cohort_drains,
        without="off",
        within="on",
        heading=f"end-to-end drain of the same backlog to a board without cohorts and to one with "
        f"cohorts of {report.args.get('cohort_size')} (each its own topic and consumers; "
        f"{_fmt(_percent(report.cohort_first_share), '%')} of the results are a player's first "
        "on the board, the case that assigns a cohort; rounds alternate which runs first):",
        target=0.85,
    )
    lines += _pairs_table(
        report.tiebreak_drains,
        without="narrow",
        within="wide",
        heading=f"end-to-end drain of the same backlog to a plain board and, with the tie-break "
        f"values, to a board with {report.args.get('tiebreak')} tie-break columns (each its own "
        "topic and consumers; rounds alternate which runs first):",
        target=0.8,
    )
    lines += _pairs_table(
        report.tournament_drains,
        without="plain",
        within="tournament",
        heading="end-to-end drain of the same backlog to a plain board and to a tournament board "
        "(join required, every player seated, max-attempts "
        f"{report.args.get('tournament_attempts')}: every result checked in the storing "
        "transaction, none refused; each its own topic and consumers; rounds alternate which "
        "runs first):",
        target=None,
    )
    lines += _events_rounds_lines(report)
    if report.redis_bytes_per_player:
        sizes = ", ".join(f"{name} {n:,.1f}" for name, n in report.redis_bytes_per_player.items())
        lines.append(f"Redis bytes per player (MEMORY USAGE of the board's keys): {sizes}")
    lines += [f"note: {note}" for note in report.notes]
    return "\n".join(lines)


def _pairs_table(
    drains: dict[str, dict[str, object]],
    *,
    without: str,
    within: str,
    heading: str,
    target: float | None,
    means: bool = False,
) -> list[str]:
    """The report's table of paired drains ("<without>-<round>", "<within>-<round>"): each
    round's rates, their ratio and the CPU of each, then the CPU of each drain by process.
    ``means``: a last row (two rounds or more) of each column's mean over the rounds, and the
    ratios of the means."""
    rounds = sorted({slug.rsplit("-", 1)[1] for slug in drains}, key=int)
    if not rounds:
        return []
    lines = [
        "",
        heading,
        "",
        "| round | without: first batch on | with | ratio | without: a tenth on | with "
        "| ratio | CPU without | CPU with | CPU ratio |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    # Per round, without and with: the rate from the first batch on, from a tenth on, the CPU.
    pairs: list[list[float]] = []
    for number in rounds:
        off = drains.get(f"{without}-{number}")
        on = drains.get(f"{within}-{number}")
        if not off or not on:
            continue
        figures: list[float] = []
        for key in ("first_per_s", "steady_per_s"):
            figures += [float(off[key]), float(on[key])]  # type: ignore[arg-type]
        for measured in (off, on):
            cpu = measured["cpu_ms_per_1000"]
            assert isinstance(cpu, dict)
            figures.append(sum(cpu.values()))
        pairs.append(figures)
        lines.append(_pairs_row(number, figures))
    if means and len(pairs) > 1:
        mean = [statistics.fmean(column) for column in zip(*pairs, strict=True)]
        lines.append(_pairs_row(f"mean of {len(pairs)}", mean))
    lines.append(
        "(CPU: ms of CPU per 1,000 results over each drain, start-up included, every process "
        "summed: the bench, the consumers, Kafka, PostgreSQL, Redis; CPU ratio: without over "
        "with" + (f"; target ratio >= {target}x)" if target is not None else ")")
    )
    for slug, measured in drains.items():
        cpu = measured["cpu_ms_per_1000"]
        assert isinstance(cpu, dict)
        lines.append(f"- CPU {slug}: " + ", ".join(f"{k} {ms:,.1f}" for k, ms in cpu.items()))
    return lines


def _pairs_row(name: str, figures: Sequence[float]) -> str:
    """One row of ``_pairs_table`` from (first batch on, a tenth on, CPU) each without and
    with: the rates with their ratios (with over without), the CPU's (without over with)."""
    first_without, first_with, steady_without, steady_with, cpu_without, cpu_with = figures
    cells = [name]
    for a, b in ((first_without, first_with), (steady_without, steady_with)):
        cells += [_fmt(a), _fmt(b), f"{b / a if a else 0:.2f}x"]
    cells += [f"{cpu_without:,.1f} ms", f"{cpu_with:,.1f} ms"]
    cells.append(f"{cpu_without / cpu_with if cpu_with else 0:.2f}x")
    return "| " + " | ".join(cells) + " |"


def _events_rounds_lines(report: Report) -> list[str]:
    """--events-rounds: the pairs table of the measured drains, then per round what their
    results changed and emitted, their CPU after start-up, and the warm-up drains before them."""
    measured, warmups = report.events_round_drains, report.events_warmup_drains
    lines = _pairs_table(
        measured,
        without="events-off",
        within="events-on",
        heading="end-to-end drain of the same backlog to two warmed boards of main's spec, rank "
        "events off and on (top 100): each board first drained a warm-up backlog over "
        f"{_fmt(_number(report.args.get('events_players')))} players (every one of them given "
        "a standing), then the measured backlog over the same players, the same on both boards "
        "(each drain its own topic and consumers; rounds alternate which board runs first):",
        target=0.85,
        means=True,
    )
    if not lines:
        return lines
    lines += [
        "",
        "per round: what the results changed and emitted (events counted on the rank-events "
        "topic), and the CPU from the first applied batch on (the consumers' start-up left out; "
        "consumers, Redis, Kafka and PostgreSQL summed, ms per 1,000 results):",
    ]
    per_result: list[float] = []
    cpu_pairs: list[tuple[float, float]] = []
    rounds = sorted({int(slug.rsplit("-", 1)[1]) for slug in measured})
    for number in rounds:
        on, off = measured.get(f"events-on-{number}"), measured.get(f"events-off-{number}")
        if not on or not off:
            continue
        per_result.append(_per_result(on))
        cpu_pairs.append((_cpu_after_startup(off), _cpu_after_startup(on)))
        without, within = cpu_pairs[-1]
        lines.append(
            f"- round {number}, measured: {_fmt(_percent(_number(on.get('changed_share'))), '%')}"
            f" of the results changed a player's value; {per_result[-1]:.2f} events per result "
            f"({_fmt(_number(on.get('events_published')))} published; events off: "
            f"{_fmt(_number(off.get('events_published')))}); CPU {without:,.1f} without, "
            f"{within:,.1f} with, {without / within if within else 0:.2f}x"
        )
        warm_on, warm_off = warmups.get(f"events-on-{number}"), warmups.get(f"events-off-{number}")
        if warm_on and warm_off:
            a = _number(warm_off.get("first_per_s")) or 0.0
            b = _number(warm_on.get("first_per_s")) or 0.0
            lines.append(
                f"- round {number}, warm-up ({_fmt(_number(warm_on.get('results')))} results): "
                f"{_fmt(_percent(_number(warm_on.get('changed_share'))), '%')} changed a value, "
                f"{_per_result(warm_on):.2f} events per result; from the first applied batch "
                f"{_fmt(b)} results/s with events against {_fmt(a)} without, "
                f"{b / a if a else 0:.2f}x"
            )
    if len(per_result) > 1:
        without = statistics.fmean(pair[0] for pair in cpu_pairs)
        within = statistics.fmean(pair[1] for pair in cpu_pairs)
        lines.append(
            f"- mean of {len(per_result)} rounds, measured: "
            f"{statistics.fmean(per_result):.2f} events per result; CPU {without:,.1f} without, "
            f"{within:,.1f} with, {without / within if within else 0:.2f}x"
        )
    return lines


def _cpu_after_startup(drain: dict[str, object]) -> float:
    """A drain's CPU per 1,000 results from its first applied batch on, summed over the
    consumers and the services (the bench process left out: it only produces and watches)."""
    cpu = drain.get("cpu_after_startup_ms_per_1000")
    if not isinstance(cpu, dict):
        return 0.0
    return sum(cpu.get(k, 0.0) for k in ("consumers", "redis", "kafka", "postgresql"))


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _per_result(drain: dict[str, object]) -> float:
    """Rank events published per result of a drain of the --events-rounds."""
    return (_number(drain.get("events_published")) or 0.0) / max(
        1.0, _number(drain.get("results")) or 0.0
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backlog", type=int, default=100_000, help="results drained e2e")
    parser.add_argument("--ceiling-rows", type=int, default=100_000)
    parser.add_argument("--consumers", type=int, default=2, help="processes in one group")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--batch", type=int, default=5_000, help="max records per poll/batch")
    parser.add_argument("--players", type=int, default=1_000_000)
    parser.add_argument("--rule", choices=["best", "cumulative"], default="best")
    parser.add_argument(
        "--boards",
        type=int,
        choices=[1, 2, 3],
        default=1,
        help="boards of the end-to-end season the results are spread over, in turn: main, then "
        "asc-best (asc, best), then latest (desc, latest)",
    )
    parser.add_argument(
        "--tiebreak",
        type=int,
        choices=[0, 1, 2, 3],
        default=0,
        help="after the end-to-end drain, drain as many results to a board ranked by points "
        "and this many tie-break columns (kills, deaths, assists), and compare",
    )
    parser.add_argument(
        "--tiebreak-rounds",
        type=int,
        default=0,
        help="with --tiebreak: then this many pairs of drains of one backlog, to a fresh plain "
        "board and (with the tie-break values) to a fresh board with the columns, alternating "
        "which runs first",
    )
    parser.add_argument(
        "--events",
        action="store_true",
        help="after the end-to-end drain (boards without rank events), drain as many results to "
        "a board of the same spec that emits them, and compare; then the steady and burst "
        "phases also measure produce-to-event (the main board emits from there on)",
    )
    parser.add_argument(
        "--events-rounds",
        type=int,
        default=0,
        help="after the end-to-end drain, this many rounds of two fresh boards of main's spec, "
        "rank events off and on (top 100), alternating which runs first: each board drains a "
        "warm-up backlog over --events-players players, then a measured backlog of the same "
        "players, most of whose results beat nothing (a season's steady state, beside "
        "--events' worst case); compares the measured drains and counts the events published",
    )
    parser.add_argument(
        "--events-players",
        type=int,
        default=20_000,
        help="with --events-rounds: the players both backlogs of a round draw from (at least 5; "
        "the warm-up gives each one a result)",
    )
    parser.add_argument(
        "--cohort-size",
        type=int,
        default=0,
        help="after the end-to-end drain, drain as many results to a board without cohorts, "
        "then to one with cohorts of this size (2..1000), and compare",
    )
    parser.add_argument(
        "--cohort-players",
        type=int,
        default=0,
        help="with --cohort-size: the players its backlogs draw from (default: --players). "
        "Fewer players than results make most results a returning player's, as on a season "
        "past its first days: a board with cohorts then assigns few",
    )
    parser.add_argument(
        "--cohort-rounds",
        type=int,
        default=1,
        help="with --cohort-size: this many pairs of drains, on fresh boards, alternating which "
        "of the two runs first",
    )
    parser.add_argument(
        "--tournament",
        action="store_true",
        help="after the end-to-end drain, drain as many results to a plain board, then to a "
        "tournament board (join required, every player seated, --tournament-attempts), and "
        "compare",
    )
    parser.add_argument(
        "--tournament-attempts",
        type=int,
        default=1_000,
        help="with --tournament: the tournament board's max-attempts (default 1,000: none of "
        "the backlog is refused, every result is checked)",
    )
    parser.add_argument(
        "--tournament-rounds",
        type=int,
        default=1,
        help="with --tournament: this many pairs of drains, on fresh boards, alternating which "
        "of the two runs first",
    )
    parser.add_argument("--steady-rate", type=float, default=2_000)
    parser.add_argument("--steady-seconds", type=float, default=20)
    parser.add_argument("--burst-rate", type=float, default=20_000)
    parser.add_argument("--burst-seconds", type=float, default=10)
    parser.add_argument("--probe-every", type=int, default=20)
    parser.add_argument(
        "--burst-producer",
        choices=["java", "python"],
        default="java",
        help="who offers the burst: Kafka's console producer fed by this process (java), or "
        "--burst-producers simulate_matches processes plus this one sending probes (python)",
    )
    parser.add_argument(
        "--burst-producers", type=int, default=2, help="simulate_matches processes (python)"
    )
    parser.add_argument("--timeout", type=float, default=300, help="max wait per drain")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="sample the consumers with py-spy during the end-to-end drain (a dev extra): the "
        "report lists the functions taking the largest shares, and the raw stacks go to "
        "bench/results/ingest-<tag>-consumer<n>.pyspy.txt (flamegraph.pl and speedscope read "
        "them)",
    )
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="run on the local Redis Cluster and 3 Kafka brokers: the same as exporting "
        "LB_REDIS_MODE=cluster LB_KAFKA_BROKERS=3 (read before Django loads its settings)",
    )
    args = parser.parse_args(argv)
    if args.events_rounds and args.events_players < 5:
        parser.error("--events-players must be at least 5")
    report = run(args)
    text = render(report)
    print(text)
    out = RESULTS_DIR / f"ingest-{report.redis_mode}-{RUN_TAG}.json"
    out.write_text(json.dumps(asdict(report), indent=2, default=str))
    print(f"\n(raw figures in {out.relative_to(ROOT)})")
    return 0 if report.e2e_drain_per_s else 1


if __name__ == "__main__":
    sys.exit(main())
