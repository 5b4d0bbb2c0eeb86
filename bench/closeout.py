"""Close-out benchmark: a season's close-out with and without every player's history archive.

Run on demand (never in the test suite)::

    bench/closeout                          # 1M players
    bench/closeout --players 10000000       # the full-size target

In one run against the local PostgreSQL (and Redis, which the close-out's key drop touches):

1. data: one board of ``--players`` players, ``--results`` match results (every player has
   at least one), generated in SQL (generate_series) into a database of the bench's own;
2. the close-out itself (``season_close``, forced: no Kafka drain): the final standings
   (FINAL_STANDINGS_SIZE), the grants, the status: the baseline;
3. the history archive of the same board (``season_history_archive``: one INSERT ... SELECT
   ranking every player): its time against the baseline, and rows per second;
4. a player with ``--seasons`` archived seasons (small seasons made for it, in the same table
   as the big board's rows): ``player_history`` (limit 50) p50 and p99 over ``--reads`` calls,
   and the HTTP endpoint's through Django's test client;
5. with ``--league``: a fresh season again, its main board as in 1, plus a league board
   (cohorts of 50, tiers bronze, silver, gold, promote and relegate 20%) with as many results
   and every player in a cohort (cohort n in tier (n - 1) mod 3, written as the assignment writes
   them); its close-out, which also decides every player's movement and pays the league's
   reward tiers by rank within each cohort, against the baseline of 2.

Isolation: its own database (``leaderboard_bench_closeout``, created and migrated if absent,
emptied at the start), its own Redis key prefix.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RUN_TAG = uuid.uuid4().hex[:8]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaderboard_project.local_clusters")
os.environ["LEADERBOARD_KEY_PREFIX"] = f"bench-{RUN_TAG}"
os.environ.setdefault("LOG_LEVEL", "WARNING")
os.environ["DATABASE_CONN_MAX_AGE"] = "0"

from bench.database import bench_database_url, bench_secret_key_default  # noqa: E402

bench_secret_key_default(bench="closeout")
os.environ["DATABASE_URL"] = bench_database_url(
    name=os.environ.get("BENCH_CLOSEOUT_DATABASE_NAME", "leaderboard_bench_closeout")
)

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from tqdm import tqdm  # noqa: E402

from bench.generate import results_generate  # noqa: E402
from closeout.models import HistoryEntry, RewardGrant  # noqa: E402
from closeout.selectors import player_history  # noqa: E402
from closeout.services import reward_tier_create, season_close, season_history_archive  # noqa: E402
from leaderboard.models import Board, Cohort, CohortMember, LeagueMovement, MatchResult  # noqa: E402
from leaderboard.services import board_create, season_setup  # noqa: E402
from seasons.leagues import LeagueSpec  # noqa: E402
from seasons.models import Season, SeasonStatus  # noqa: E402

SEASON_ID = 990_101
LEAGUE_COHORT = 50
LEAGUE_TIERS = ("bronze", "silver", "gold")
HISTORY_PLAYER = 1
RESULTS_DIR = ROOT / "bench" / "results"
T = TypeVar("T")


@dataclass
class Report:
    started_at: str
    args: dict[str, object]
    load_average_at_start: str = ""
    generate_s: float = 0.0
    players: int = 0
    closeout_s: float = 0.0
    archive_s: float = 0.0
    archive_rows: int = 0
    history_read_ms: dict[str, float] = field(default_factory=dict)
    history_http_ms: dict[str, float] = field(default_factory=dict)
    # --league: the close-out of a season with the league board beside main, and what it wrote.
    league_closeout_s: float = 0.0
    league_movements: int = 0
    league_grants: int = 0
    notes: list[str] = field(default_factory=list)


@contextmanager
def stage(label: str) -> Iterator[None]:
    """Say what runs, and how long it has been running every 10 s (one statement can take
    minutes at full size)."""
    started = time.monotonic()
    done = threading.Event()

    def tick() -> None:
        while not done.wait(10):
            print(f"  ... {label}: {time.monotonic() - started:.0f} s", flush=True)

    print(f"{label} ...", flush=True)
    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        print(f"{label}: {time.monotonic() - started:.1f} s", flush=True)


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    started = time.monotonic()
    value = fn()
    return time.monotonic() - started, value


def fresh_season() -> Season:
    with connection.cursor() as cur:
        # The big tables emptied here: the season's delete below would walk them row by row.
        tables = [MatchResult, HistoryEntry, CohortMember, Cohort, LeagueMovement, RewardGrant]
        cur.execute(f"TRUNCATE {', '.join(t._meta.db_table for t in tables)} CASCADE")
    Season.objects.filter(pk__gte=SEASON_ID).delete()
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(days=31)
    season = season_setup(
        season_id=SEASON_ID,
        name="bench close-out",
        starts_at=start,
        ends_at=start + timedelta(days=30),
    )
    Season.objects.filter(pk=SEASON_ID).update(status=SeasonStatus.ACTIVE)
    reward_tier_create(season_id=SEASON_ID, rank_from=1, rank_to=1, reward_name="crown")
    reward_tier_create(season_id=SEASON_ID, rank_from=2, rank_to=100, reward_name="gems")
    season.refresh_from_db()
    return season


def history_of_one_player(*, seasons: int) -> None:
    """``seasons`` closed one-board seasons in which HISTORY_PLAYER finished, archived."""
    ends = datetime.now(UTC).replace(microsecond=0) - timedelta(days=seasons + 2)
    rows = []
    for n in tqdm(range(seasons), desc="seasons of the history player", unit=" seasons"):
        season = season_setup(
            season_id=SEASON_ID + 1 + n,
            name=f"bench cup #{n + 1}",
            starts_at=ends + timedelta(days=n),
            ends_at=ends + timedelta(days=n + 1),
        )
        Season.objects.filter(pk=season.id).update(status=SeasonStatus.CLOSED)
        rows.append(
            HistoryEntry(
                season=season,
                board=season.boards.get(),
                player_id=HISTORY_PLAYER,
                rank=n + 1,
                points=1000 - n,
                total=seasons * 10,
                season_ends_at=season.ends_at,
            )
        )
    HistoryEntry.objects.bulk_create(rows)
    with connection.cursor() as cur:
        cur.execute(f"ANALYZE {HistoryEntry._meta.db_table}")


def league_board_fill(*, season: Season, players: int, results: int) -> int:
    """A league board on ``season`` (cohorts of LEAGUE_COHORT), its results, and every player in
    a cohort (players in id order, cohort n in tier (n - 1) mod 3), with a reward for each cohort's
    winner in every tier; the board's id."""
    board = board_create(
        season_id=season.id,
        slug="league",
        name="League",
        cohort_size=LEAGUE_COHORT,
        league=LeagueSpec(LEAGUE_TIERS, 20, 20),
    )
    results_generate(
        season=season, players=players, results=results, spread_days=29, board_id=board.id
    )
    cohorts = -(-players // LEAGUE_COHORT)
    cohort_table, member_table = Cohort._meta.db_table, CohortMember._meta.db_table
    values = {"board": board.id, "size": LEAGUE_COHORT, "players": players, "cohorts": cohorts}
    with stage("league cohorts and memberships"), connection.cursor() as cur:
        cur.execute(
            f"""INSERT INTO {cohort_table} (board_id, number, tier, members, opened_at)
                SELECT %(board)s, n, (n - 1) %% 3,
                       least(%(size)s, %(players)s - (n - 1) * %(size)s), now()
                FROM generate_series(1, %(cohorts)s) n""",
            values,
        )
        cur.execute(
            f"""INSERT INTO {member_table} (board_id, cohort_id, player_id, joined_at)
                SELECT %(board)s, c.id, p, now()
                FROM generate_series(1, %(players)s) p
                JOIN {cohort_table} c
                  ON c.board_id = %(board)s AND c.number = (p - 1) / %(size)s + 1""",
            values,
        )
        Board.objects.filter(id=board.id).update(cohort_members=players)
        cur.execute(f"ANALYZE {CohortMember._meta.db_table}")
    for tier in LEAGUE_TIERS:
        reward_tier_create(
            season_id=season.id,
            board_slug="league",
            league_tier=tier,
            rank_from=1,
            rank_to=1,
            reward_name=f"{tier} cup",
        )
    return board.id


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50": round(statistics.median(ordered) * 1000, 3),
        "p99": round(ordered[int(len(ordered) * 0.99) - 1] * 1000, 3),
    }


def run(args: argparse.Namespace) -> Report:
    report = Report(started_at=datetime.now(UTC).isoformat(), args=vars(args))
    report.load_average_at_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    call_command("migrate", verbosity=0)
    season = fresh_season()
    report.generate_s, _ = timed(
        lambda: results_generate(
            season=season, players=args.players, results=args.results, spread_days=29
        )
    )
    with stage("close-out (standings, grants, status; the baseline)"):
        report.closeout_s, result = timed(
            lambda: season_close(season_id=season.id, force=True, grace_seconds=0)
        )
    if not result.closed:
        report.notes.append(f"the close-out did not close the season: {result.describe()}")
        return report
    with stage("history archive (every player)"):
        report.archive_s, archived = timed(lambda: season_history_archive(season_id=season.id))
    report.archive_rows = archived.rows
    report.players = archived.rows
    history_of_one_player(seasons=args.seasons)
    reads = []
    for _ in tqdm(range(args.reads), desc="history reads (selector)", unit=" reads"):
        elapsed, items = timed(lambda: player_history(player_id=HISTORY_PLAYER, limit=50))
        reads.append(elapsed)
    assert len(items) == 50, len(items)
    report.history_read_ms = percentiles(reads)
    client = Client(HTTP_HOST="127.0.0.1")
    settings.API_ANON_THROTTLE_RATE = "off"
    http = []
    for _ in tqdm(range(args.reads), desc="history reads (HTTP)", unit=" reads"):
        elapsed, response = timed(lambda: client.get(f"/api/players/{HISTORY_PLAYER}/history"))
        assert response.status_code == 200, response.content[:200]
        http.append(elapsed)
    report.history_http_ms = percentiles(http)
    if args.league:
        season = fresh_season()
        results_generate(season=season, players=args.players, results=args.results, spread_days=29)
        board_id = league_board_fill(season=season, players=args.players, results=args.results)
        with stage("close-out with the league board (its movements and grants too)"):
            report.league_closeout_s, result = timed(
                lambda: season_close(season_id=season.id, force=True, grace_seconds=0)
            )
        if not result.closed:
            report.notes.append(f"the league close-out did not close: {result.describe()}")
        report.league_movements = LeagueMovement.objects.filter(board_id=board_id).count()
        report.league_grants = RewardGrant.objects.filter(tier__board_id=board_id).count()
    return report


def render(report: Report) -> str:
    extra = report.archive_s / report.closeout_s if report.closeout_s else 0.0
    rate = report.archive_rows / report.archive_s if report.archive_s else 0.0
    lines = [
        f"close-out benchmark, {report.started_at} (load average at start "
        f"{report.load_average_at_start})",
        f"- data: {report.players:,} players, {report.args['results']:,} results "
        f"(generated in {report.generate_s:.0f} s)",
        f"- close-out without the history (standings top {settings.FINAL_STANDINGS_SIZE}, "
        f"grants, status): {report.closeout_s:.1f} s",
        f"- history archive: {report.archive_s:.1f} s for {report.archive_rows:,} rows "
        f"({rate:,.0f} rows/s), {extra:.2f}x the close-out's time on top of it",
        f"- history of a player with {report.args['seasons']} archived seasons (limit 50): "
        f"selector p50 {report.history_read_ms.get('p50')} ms, p99 "
        f"{report.history_read_ms.get('p99')} ms; HTTP (in-process) p50 "
        f"{report.history_http_ms.get('p50')} ms, p99 {report.history_http_ms.get('p99')} ms",
    ]
    if report.args.get("league"):
        league_extra = report.league_closeout_s / report.closeout_s if report.closeout_s else 0.0
        movements_rate = (
            report.league_movements / (report.league_closeout_s - report.closeout_s)
            if report.league_closeout_s > report.closeout_s
            else 0.0
        )
        lines.append(
            f"- close-out with a league board of the same {report.players:,} players beside main "
            f"(cohorts of {LEAGUE_COHORT}, {len(LEAGUE_TIERS)} tiers): "
            f"{report.league_closeout_s:.1f} s, {league_extra:.2f}x the baseline; "
            f"{report.league_movements:,} movements and {report.league_grants:,} league grants "
            f"({movements_rate:,.0f} movements/s over the baseline's time)"
        )
    lines += [f"note: {note}" for note in report.notes]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--players", type=int, default=1_000_000)
    parser.add_argument(
        "--results", type=int, default=None, help="match results (default: one per player)"
    )
    parser.add_argument("--seasons", type=int, default=100, help="the history player's seasons")
    parser.add_argument("--reads", type=int, default=500)
    parser.add_argument(
        "--league",
        action="store_true",
        help="then close a season with a league board of the same players beside main",
    )
    args = parser.parse_args(argv)
    args.results = max(args.results or args.players, args.players)
    report = run(args)
    text = render(report)
    print(text)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    out = RESULTS_DIR / f"closeout-{RUN_TAG}.json"
    out.write_text(json.dumps(asdict(report), indent=2, default=str))
    print(f"\n(raw figures in {out.relative_to(ROOT)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
