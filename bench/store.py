"""PostgreSQL's cost per stored result: the ingest statement with and without a per-row
foreign-key check on the season (the schema decision in ingestion/migrations/0006).

Run on demand (never in the test suite)::

    .venv/bin/python bench/store.py [--results 200000] [--batch 5000] [--rounds 2]

Each round stores ``--results`` fresh results through ``match_results_store`` (the consumer's
own store step: season lock, COPY, INSERT ... ON CONFLICT DO NOTHING RETURNING) twice: as
shipped, and with the season foreign key the table used to carry (added NOT VALID, deferred,
as Django created it; dropped after). It reports the PostgreSQL backend's CPU per result, read
from /proc (so the server must run on this machine), and the ratio between the two. Rounds
alternate the variants so that the table's growth favours neither. Then the disk a stored result
takes: the growth of the results table (heap and TOAST) and of its indexes over the rows the
run stored.

Last, unless ``--no-prune``, the season is closed and its results deleted as the retention deletes
a closed season's (``season_results_prune``: batches of 10,000 per transaction through the board
index), with the backend's CPU and the wall time per deleted result against the shipped store's
of the same run; then the bench's database gives the deleted rows' space back (``VACUUM FULL``,
unmeasured), so that a later run's disk figure is the growth of new rows, not space reused.

Isolation: its own database (``leaderboard_bench_store``, created and migrated if absent), its
own season; nothing touches Redis or Kafka.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from random import Random

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaderboard_project.local_clusters")
os.environ.setdefault("LOG_LEVEL", "WARNING")

from bench.database import bench_database_url, bench_secret_key_default  # noqa: E402

bench_secret_key_default(bench="store")
os.environ["DATABASE_URL"] = bench_database_url(name="leaderboard_bench_store")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.utils import timezone  # noqa: E402
from tqdm import tqdm  # noqa: E402

from closeout.services import season_results_prune  # noqa: E402
from leaderboard.models import MatchResult  # noqa: E402
from leaderboard.selectors.boards import main_board_get  # noqa: E402
from leaderboard.services import (  # noqa: E402
    ResultColumns,
    ResultRow,
    match_results_store,
    season_setup,
)
from seasons.models import Season, SeasonStatus  # noqa: E402

_FK = "bench_store_season_fk"
_RESULTS = MatchResult._meta.db_table
_ADD_FK = (
    f"ALTER TABLE {_RESULTS} ADD CONSTRAINT {_FK} FOREIGN KEY (season_id) "
    f"REFERENCES {Season._meta.db_table} (id) DEFERRABLE INITIALLY DEFERRED NOT VALID"
)
_DROP_FK = f"ALTER TABLE {_RESULTS} DROP CONSTRAINT IF EXISTS {_FK}"


def _backend_cpu_seconds() -> float:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _table_bytes() -> tuple[int, int, int]:
    """The results table's (heap and TOAST, indexes, rows): what its growth costs on disk."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_table_size(%s::regclass), pg_indexes_size(%s::regclass), count(*) FROM "
            + _RESULTS,
            [_RESULTS, _RESULTS],
        )
        table, indexes, rows = cursor.fetchone()
    return int(table), int(indexes), int(rows)


def _results(season: Season, count: int, rng: Random, first_offset: int) -> list[ResultRow]:
    span = int((season.ends_at - season.starts_at).total_seconds()) - 1
    board_id = main_board_get(season_id=season.id).id
    return [
        ResultRow(
            match_id=uuid.UUID(int=rng.getrandbits(128), version=4),
            player_id=rng.randrange(1, 1_000_000),
            season_id=season.id,
            board_id=board_id,
            points=rng.randrange(0, 5_000),
            achieved_at=season.starts_at + timedelta(seconds=rng.randrange(span)),
            kafka_partition=0,
            kafka_offset=first_offset + n,
        )
        for n in range(count)
    ]


def _store(results: list[ResultRow], batch: int, label: str) -> tuple[float, float]:
    """(backend CPU, wall) seconds to store ``results`` in batches."""
    cpu, wall = _backend_cpu_seconds(), time.monotonic()
    for start in tqdm(range(0, len(results), batch), desc=label, unit="batch", leave=False):
        match_results_store(results=ResultColumns.of(results[start : start + batch]))
    return _backend_cpu_seconds() - cpu, time.monotonic() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=int, default=200_000, help="per variant and round")
    parser.add_argument("--batch", type=int, default=5_000, help="results per store call")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--no-prune", action="store_true", help="keep the run's results (no prune measured)"
    )
    args = parser.parse_args()

    call_command("migrate", verbosity=0)
    now = datetime.now(UTC).replace(microsecond=0)
    season_id = (max(Season.objects.values_list("id", flat=True), default=0) or 0) + 1
    season = season_setup(
        season_id=season_id,
        name=f"bench store {season_id}",
        starts_at=now - timedelta(days=30),
        ends_at=now + timedelta(days=30),
    )
    rng = Random(season_id)
    totals = {"shipped": [0.0, 0.0], "per-row foreign key": [0.0, 0.0]}
    offset = 0
    with connection.cursor() as cursor:
        cursor.execute(_DROP_FK)
    size_before = _table_bytes()
    try:
        for round_ in range(args.rounds):
            order = list(totals) if round_ % 2 == 0 else list(reversed(totals))
            for variant in order:
                results = _results(season, args.results, rng, offset)
                offset += args.results
                with connection.cursor() as cursor:
                    cursor.execute(_DROP_FK)
                    if variant != "shipped":
                        cursor.execute(_ADD_FK)
                cpu, wall = _store(results, args.batch, f"round {round_ + 1}, {variant}")
                totals[variant][0] += cpu
                totals[variant][1] += wall
                print(
                    f"round {round_ + 1} {variant:>20}: backend CPU "
                    f"{cpu / args.results * 1e6:5.1f} µs/result, wall "
                    f"{wall / args.results * 1e6:5.1f} µs/result",
                    flush=True,
                )
    finally:
        with connection.cursor() as cursor:
            cursor.execute(_DROP_FK)
    table, indexes, rows = (
        after - before for after, before in zip(_table_bytes(), size_before, strict=True)
    )
    n = args.results * args.rounds
    shipped, fk = (totals[v][0] / n * 1e6 for v in totals)
    print(
        f"\nPostgreSQL backend CPU per stored result ({n:,} results each, batches of "
        f"{args.batch:,}): shipped {shipped:.1f} µs, with the per-row foreign key {fk:.1f} µs; "
        f"the foreign key is {(fk - shipped) / fk:.0%} of the latter, shipped = "
        f"{fk / shipped:.2f}x fewer CPU per result"
    )
    if rows > 0:
        print(
            f"Disk per stored result (the results table's growth over the {rows:,} rows this run "
            f"stored): {(table + indexes) / rows:.1f} bytes, of which the table (heap and TOAST) "
            f"{table / rows:.1f} and its indexes {indexes / rows:.1f}"
        )
    if not args.no_prune:
        _prune(
            season,
            stored=n * 2,
            store_cpu=totals["shipped"][0] / n,
            store_wall=totals["shipped"][1] / n,
        )


def _prune(season: Season, *, stored: int, store_cpu: float, store_wall: float) -> None:
    """Close the season and delete its results as the retention does; report per result."""
    settings.MATCH_RESULTS_RETENTION_DAYS = 1
    Season.objects.filter(id=season.id).update(
        status=SeasonStatus.CLOSED, closed_at=timezone.now() - timedelta(days=2)
    )
    bar = tqdm(total=stored, desc="prune", unit="result", leave=False)

    def progress(results: int, refused: int) -> None:
        bar.update(results - bar.n)

    cpu, wall = _backend_cpu_seconds(), time.monotonic()
    pruned = season_results_prune(season_id=season.id, progress=progress)
    cpu, wall = _backend_cpu_seconds() - cpu, time.monotonic() - wall
    bar.close()
    per_cpu, per_wall = cpu / pruned.results, wall / pruned.results
    print(
        f"Prune of the season's {pruned.results:,} results (batches of 10,000): backend CPU "
        f"{per_cpu * 1e6:.1f} µs/result ({per_cpu / store_cpu:.2f}x the shipped store's), wall "
        f"{per_wall * 1e6:.1f} µs/result ({per_wall / store_wall:.2f}x), "
        f"{pruned.results / wall:,.0f} results/s"
    )
    # Deleted rows leave space PostgreSQL reuses for later inserts (once vacuumed): a later
    # run's growth would then read low. The bench's own database gives it back, unmeasured.
    print("Giving the pruned space back (VACUUM FULL of the bench database's results table)")
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM FULL {_RESULTS}")


if __name__ == "__main__":
    main()
