"""Rebuild benchmark: a season board rebuilt from PostgreSQL while ingestion keeps running.

Run on demand (never in the test suite)::

    bench/rebuild                                          # 1M players / 2M results
    bench/rebuild --players 10000000 --results 20000000    # the full-size target

In one run against the local services:

1. data: ``--results`` match results of ``--players`` players (every player has at least one),
   generated in SQL (generate_series) into a database of the bench's own;
2. baselines, each alone: the PostgreSQL aggregation alone (the rebuild's own COPY stream,
   read to the end, no Redis) and a raw Redis load alone (the same ZADD arguments, already in
   memory, pipelined into a scratch key; for each ``--zadd-batches`` size);
3. a cold rebuild (no live board), then a rebuild while an ingestion thread keeps storing and
   applying new results through the consumer's own batch handler (``match_results_ingest``,
   no Kafka); when both are done, the board is compared with PostgreSQL member by member:
   any result lost or counted twice shows up as a difference.

Isolation: its own database (``leaderboard_bench_rebuild``, created and migrated if absent,
emptied at the start), its own Redis key prefix; it removes its keys at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from random import Random

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RUN_TAG = uuid.uuid4().hex[:8]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaderboard_project.local_clusters")
os.environ["LEADERBOARD_KEY_PREFIX"] = f"bench-{RUN_TAG}"
os.environ.setdefault("LOG_LEVEL", "WARNING")
# The reader thread's long COPY stays on one connection; no pooling games.
os.environ["DATABASE_CONN_MAX_AGE"] = "0"


from bench.database import bench_database_url, bench_secret_key_default  # noqa: E402

bench_secret_key_default(bench="rebuild")
os.environ["DATABASE_URL"] = bench_database_url(
    name=os.environ.get("BENCH_REBUILD_DATABASE_NAME", "leaderboard_bench_rebuild")
)

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from tqdm import tqdm  # noqa: E402

from bench.generate import results_generate  # noqa: E402
from ingestion.records import ConsumedRecord  # noqa: E402
from ingestion.schema import MatchResultMessage  # noqa: E402
from ingestion.services import match_results_ingest  # noqa: E402
from leaderboard import keys  # noqa: E402
from leaderboard.models import MatchResult, PlayerBan  # noqa: E402
from leaderboard.redis import get_board_redis  # noqa: E402
from leaderboard.selectors.boards import main_board_get  # noqa: E402
from leaderboard.selectors.scores import board_scores_zadd_chunks  # noqa: E402
from leaderboard.services import (  # noqa: E402
    REBUILD_SORTED_RUNS,
    board_rebuild,
    season_setup,
)
from seasons.models import Season, SeasonStatus  # noqa: E402

SEASON_ID = 990_001


@dataclass
class Report:
    started_at: str
    args: dict[str, object]
    generate_s: float = 0.0
    members: int = 0
    pg_aggregation_s: float = 0.0
    pg_aggregation_player_order_s: float = 0.0
    redis_load_player_order_s: float = 0.0
    redis_load_s: dict[str, float] = field(default_factory=dict)
    cold_rebuild_s: float = 0.0
    live_rebuild_s: float = 0.0
    ingested_during_rebuild: int = 0
    ingest_rate_during_rebuild_per_s: float = 0.0
    delta_members: int = 0
    board_equals_postgresql: bool = False
    differences: int = 0
    notes: list[str] = field(default_factory=list)


def _load_avg() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def fresh_season(args: argparse.Namespace) -> Season:
    with connection.cursor() as cur:
        # The bench's own database: start from nothing (a previous run may have stopped midway).
        cur.execute(f"TRUNCATE {MatchResult._meta.db_table}, {PlayerBan._meta.db_table} CASCADE")
    Season.objects.filter(pk=SEASON_ID).delete()
    # Every generated result lies in the first 80 days: they must all be in the past, or the
    # ingestion thread's results are refused as achieved in the future.
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(days=81)
    season = season_setup(
        season_id=SEASON_ID,
        name="bench rebuild",
        starts_at=start,
        ends_at=start + timedelta(days=90),
        rule=args.rule,
    )
    Season.objects.filter(pk=SEASON_ID).update(status=SeasonStatus.ACTIVE)
    season.refresh_from_db()
    return season


def count_results(season: Season) -> int:
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT count(*) FROM {MatchResult._meta.db_table} WHERE board_id = %s",
            [main_board_get(season_id=season.id).id],
        )
        row = cur.fetchone()
    return int(row[0]) if row else 0


def reusable_season(args: argparse.Namespace) -> Season | None:
    """The data set of an earlier run, when it has this run's rule and at least its results.

    Generating 20M rows takes about 7 minutes; a rebuild only reads them, and the results an
    earlier run ingested while rebuilding are ordinary results of the same players.
    """
    season = Season.objects.filter(
        pk=SEASON_ID, boards__slug="main", boards__rule=args.rule
    ).first()
    if season is None or count_results(season) < args.results:
        return None
    with connection.cursor() as cur:
        cur.execute(
            "SELECT count(*) FROM pg_indexes WHERE indexname = %s",
            [MatchResult._meta.indexes[0].name],
        )
        row = cur.fetchone()
    return season if row and row[0] else None


def pg_aggregation_alone(
    season: Season, *, sorted_runs: int | None
) -> tuple[float, list[list[bytes]]]:
    """The rebuild's own stream read to the end: in its sorted runs, or in player order."""
    kept: list[list[bytes]] = []
    started = time.monotonic()
    order = "player order" if sorted_runs is None else f"{sorted_runs} sorted runs"
    with transaction.atomic():
        with connection.cursor() as cur:
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        with tqdm(
            desc=f"PostgreSQL aggregation alone ({order})", unit=" players", unit_scale=True
        ) as bar:
            for chunk in board_scores_zadd_chunks(
                board=main_board_get(season_id=season.id), sorted_runs=sorted_runs
            ):
                kept.append(chunk)
                bar.update(len(chunk) // 2)
    return time.monotonic() - started, kept


def redis_load_alone(chunks: list[list[bytes]], batch: int, order: str) -> float:
    client = get_board_redis()
    scratch = f"{keys.board(board_id=main_board_get(season_id=SEASON_ID).id)}:bench-scratch"
    client.delete(scratch)
    step = 2 * batch
    started = time.monotonic()
    with tqdm(
        desc=f"Redis ZADD alone, {batch}/ZADD, {order}", unit=" players", unit_scale=True
    ) as bar:
        for flat in chunks:
            pipe = client.pipeline(transaction=False)
            for i in range(0, len(flat), step):
                pipe.execute_command("ZADD", scratch, *flat[i : i + step])
            pipe.execute()
            bar.update(len(flat) // 2)
    elapsed = time.monotonic() - started
    client.unlink(scratch)
    return elapsed


class Ingestor(threading.Thread):
    """The consumer's batch handler on a stream of new results (no Kafka in between)."""

    def __init__(self, season: Season, players: int, batch: int) -> None:
        super().__init__(daemon=True)
        self.season, self.players, self.batch = season, players, batch
        self.rng = Random(7)
        self.stop = threading.Event()
        self.offset = 0
        self.stored = 0
        self.errors: list[BaseException] = []

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                records = []
                for _ in range(self.batch):
                    message = MatchResultMessage(
                        match_id=uuid.uuid4(),
                        # Existing players (a cumulative sum must not double) and new ones.
                        player_id=self.rng.randint(1, self.players + 100_000),
                        season_id=self.season.id,
                        points=self.rng.randint(0, 60_000),
                        achieved_at=self.season.starts_at
                        + timedelta(seconds=self.rng.randint(0, 80 * 86400)),
                    )
                    records.append(ConsumedRecord(0, self.offset, None, message.to_bytes()))
                    self.offset += 1
                outcome = match_results_ingest(
                    topic=f"bench-{RUN_TAG}", records=records, dead_letters=_NoDeadLetters()
                )
                self.stored += outcome.applied
        except BaseException as exc:
            self.errors.append(exc)
        finally:
            connection.close()


class _NoDeadLetters:
    def publish(self, *, letters: object) -> None:
        raise RuntimeError(f"the bench produced an invalid result: {letters}")


def board_matches_postgresql(season: Season) -> int:
    """How many members differ between the Redis board and the aggregation (0 = identical)."""
    client = get_board_redis()
    key = keys.board(board_id=main_board_get(season_id=season.id).id)
    expected: dict[bytes, int] = {}
    for flat in board_scores_zadd_chunks(board=main_board_get(season_id=season.id)):
        for i in range(0, len(flat), 2):
            expected[flat[i + 1]] = int(flat[i])
    differences = 0
    seen = 0
    for member, score in client.zscan_iter(key, count=5000):
        seen += 1
        if expected.get(member) != int(score):
            differences += 1
    return differences + abs(len(expected) - seen)


def run(args: argparse.Namespace) -> Report:
    report = Report(
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        args={k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
    )
    report.notes.append(f"load average at start: {_load_avg()}")
    call_command("migrate", verbosity=0)
    season = reusable_season(args) if args.reuse else None
    if season is None:
        season = fresh_season(args)
        t = time.monotonic()
        results_generate(season=season, players=args.players, results=args.results, spread_days=80)
        report.generate_s = time.monotonic() - t
    else:
        report.notes.append(
            f"reused the data of an earlier run: {count_results(season):,} results "
            "(the generated ones plus those earlier runs ingested)"
        )
    if args.generate_only:
        return report

    # The rebuild's order first (what it is measured against), then player order, to show
    # what the sorted runs buy on each side.
    report.pg_aggregation_s, chunks = pg_aggregation_alone(season, sorted_runs=REBUILD_SORTED_RUNS)
    report.members = sum(len(c) for c in chunks) // 2
    for batch in args.zadd_batches:
        report.redis_load_s[str(batch)] = redis_load_alone(chunks, batch, "sorted runs")
    del chunks
    best_batch = min(args.zadd_batches, key=lambda b: report.redis_load_s[str(b)])
    report.notes.append(f"rebuilds use {best_batch} members per ZADD (fastest raw load)")
    if args.player_order_baselines:
        report.pg_aggregation_player_order_s, chunks = pg_aggregation_alone(
            season, sorted_runs=None
        )
        report.redis_load_player_order_s = redis_load_alone(chunks, best_batch, "player order")
        del chunks

    with tqdm(desc="cold rebuild", unit=" players", unit_scale=True) as bar:
        result = board_rebuild(
            board_id=main_board_get(season_id=season.id).id,
            progress=bar.update,
            zadd_batch=best_batch,
        )
    report.cold_rebuild_s = result.seconds

    ingestor = Ingestor(season, args.players, args.ingest_batch)
    ingestor.start()
    time.sleep(1.0)  # ingestion running before the rebuild starts, as in production
    before = ingestor.stored
    t = time.monotonic()
    with tqdm(desc="rebuild while ingesting", unit=" players", unit_scale=True) as bar:
        result = board_rebuild(
            board_id=main_board_get(season_id=season.id).id,
            progress=bar.update,
            zadd_batch=best_batch,
        )
    elapsed = time.monotonic() - t
    during = ingestor.stored - before
    time.sleep(1.0)  # and still running after the RENAME
    ingestor.stop.set()
    ingestor.join()
    if ingestor.errors:
        raise ingestor.errors[0]
    report.live_rebuild_s = result.seconds
    report.ingested_during_rebuild = during
    report.ingest_rate_during_rebuild_per_s = during / elapsed
    report.delta_members = result.delta_members
    report.differences = board_matches_postgresql(season)
    report.board_equals_postgresql = report.differences == 0
    report.notes.append(f"results ingested in total by the thread: {ingestor.stored}")
    report.notes.append(f"load average at end: {_load_avg()}")
    return report


def render(report: Report) -> str:
    lines = [
        f"players on the board: {report.members:,} (generated in {report.generate_s:.1f}s)",
        f"baseline, PostgreSQL aggregation alone ({REBUILD_SORTED_RUNS} sorted runs): "
        f"{report.pg_aggregation_s:.1f}s",
    ]
    for batch, seconds in report.redis_load_s.items():
        lines.append(
            f"baseline, Redis ZADD load alone (sorted runs, {batch}/ZADD): {seconds:.1f}s "
            f"({report.members / seconds:,.0f} members/s)"
        )
    if report.redis_load_player_order_s:
        best = min(report.redis_load_s.values())
        lines += [
            f"for comparison, in player order: PostgreSQL aggregation alone "
            f"{report.pg_aggregation_player_order_s:.1f}s; Redis ZADD load alone "
            f"{report.redis_load_player_order_s:.1f}s "
            f"({report.redis_load_player_order_s / best:.2f} x the sorted runs' load)",
        ]
    serial = report.pg_aggregation_s + min(report.redis_load_s.values())
    lines += [
        f"sum of the two baselines (no overlap): {serial:.1f}s",
        f"cold rebuild end to end: {report.cold_rebuild_s:.1f}s "
        f"({report.cold_rebuild_s / serial:.2f} x the sum)",
        f"rebuild while ingesting: {report.live_rebuild_s:.1f}s, "
        f"{report.ingested_during_rebuild:,} results ingested meanwhile "
        f"({report.ingest_rate_during_rebuild_per_s:,.0f}/s), "
        f"{report.delta_members:,} via the delta",
        f"board equals PostgreSQL after it: {report.board_equals_postgresql} "
        f"({report.differences} differences)",
        *report.notes,
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--players", type=int, default=1_000_000)
    parser.add_argument("--results", type=int, default=2_000_000)
    parser.add_argument("--rule", choices=["best", "cumulative"], default="best")
    parser.add_argument(
        "--zadd-batches", type=lambda s: [int(x) for x in s.split(",")], default=[250, 1000, 4000]
    )
    parser.add_argument("--ingest-batch", type=int, default=500, help="results per consumer batch")
    parser.add_argument("--json", type=Path, help="also write the report here")
    parser.add_argument(
        "--player-order-baselines",
        action="store_true",
        help="also measure both baselines in player order (the order before sorted runs)",
    )
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="keep the data set of an earlier run when it has this rule and enough results",
    )
    parser.add_argument(
        "--generate-only", action="store_true", help="generate the data set (for --reuse) and stop"
    )
    args = parser.parse_args()
    if args.results < args.players:
        parser.error("--results must be at least --players (every player has a result)")
    try:
        report = run(args)
    finally:
        client = get_board_redis()
        stale = list(client.scan_iter(match=keys.prefix_pattern(), count=1000))
        if stale:
            client.unlink(*stale)
    if args.generate_only:
        print(f"data set ready ({report.generate_s:.1f}s); measure with --reuse")
        return 0
    print(render(report))
    if args.json:
        args.json.write_text(json.dumps(asdict(report), indent=2))
    return 0 if report.board_equals_postgresql else 1


if __name__ == "__main__":
    sys.exit(main())
