"""Read-path benchmark: the board in Redis vs the ceiling (raw Redis) vs PostgreSQL only.

    .venv/bin/python bench/read/run.py --players 1000000 [--duration 10] [--connections 8]

1. Loads a season board of ``--players`` players (random points and times, fixed seed) into a
   dedicated Redis db with pipelined ZADDs, and the same rows into a PostgreSQL table with an
   index on (season_id, score DESC) (score = points with the time tie-break), both with a
   progress bar. Reused on the next run when the sizes match (``--reload`` forces it).
2. Times each operation from Python, sequentially on one connection: raw Redis commands (the
   ceiling), the product's selectors (one Lua script each), and the PostgreSQL-only queries.
3. Serves the product with gunicorn (``--workers`` = CPU count, sync workers, DEBUG off, the
   production throttle with a rate no client reaches) while a thread refreshes the top-list
   snapshot every second as beat would, and measures each endpoint with wrk over loopback
   beside a bare Django view.

Names (``--names``): a name and country are written into the name cache for every player
(pipelined HSETs into the product's buckets, ``leaderboard/player_names.py``; what the cache
holds once every player has a profile), and a second board of the season (``unnamed``) gets the
same scores under player ids + 10^12, for which no name exists: every entry of that board joins
null names (the same round trip, with nothing found). Each operation is then measured on both
boards back to back, unnamed first, so both figures share the machine's load of that minute.
The report gives each figure with names against the same figure without (player entry, around,
friends p50 on one connection; top-100 throughput under load).

Metadata (``--metadata``): a board of the season that keeps metadata (``Board.keeps_metadata``)
gets the same scores as main under the same player ids, and one stored result per player
(``MatchResult`` rows by COPY, each with a car and a replay id as its metadata), so each of its
entries finds its deciding result in PostgreSQL (``leaderboard/selectors/metadata.py``). The
selectors (page of 100, player entry, around, friends 200) run on main, then on that board, back
to back; the report gives each figure with metadata against the same figure without.

Tie-break columns (``--tiebreak N``, 1..3): a board of the season ranked by points and N
tie-break columns (kills desc, deaths asc, assists desc: keys past 53 bits, kept as wide keys,
docs/tie-break-columns.md) gets main's points and times under the same player ids, and random
column values (0..49, so equal points are often decided by them); its sorted set and index are
written straight into Redis. The selectors run on main, then on that board, back to back; the
report gives each figure against main's, and each board's Redis bytes per player (MEMORY USAGE
of its keys, SAMPLES 0, over its players).

Cohorts (``--cohort-size N``, 2..1000): a league board of the season (``league``: cohorts of N,
tiers bronze, silver and gold, docs/leagues.md) gets main's scores under the same player ids, and
every player a cohort in PostgreSQL (``Cohort`` and ``CohortMember`` rows by COPY, players in id
order, the cohorts' tiers in turn), as ingestion and the close-out would have left them. The
player entry runs on main, then the player entry and the player's cohort (``.../cohort``: the
cohort's members from PostgreSQL, their entries from the board in one script) on the league
board in turn, call by call, then a cohort's top, each for random players (cold reads: a process
memoizes a full cohort, and a player's cohort, for good, but rarely meets the same player twice
here); over HTTP too, where the league board's entry and the cohort also run in turn in short
slices of one connection (``cohort_slices``). The report gives the cohort read against the
player entry.

Results are printed as Markdown and saved under bench/results/. Nothing here runs in the test
suite. It uses Redis db ``--redis-db`` (default 12: the benchmark's own) of the Redis that
``REDIS_URL`` names and the PostgreSQL database ``--database`` (created if missing) on the
server ``DATABASE_URL`` names, like every process of the project (defaults: the local services'
ports), so it runs beside another checkout's services; ``--cleanup`` drops both data sets at
the end.

Cluster mode: ``--cluster`` (or ``LB_REDIS_MODE=cluster`` exported, as for every process of
the project; the flag also sets ``LB_KAFKA_BROKERS=3``, which the read path does not use) puts
the board on the local Redis Cluster (README, "Running on clusters"), where the product's
``get_board_redis()`` and the gunicorn workers find it; a cluster has db 0 only, so the key
prefix ``bench`` isolates it there, and ``--cleanup`` deletes ``bench:*`` on every master. The
raw-Redis ceiling then goes through the same ``RedisCluster`` client. Django's cache and the
Celery broker stay on the single Redis as in the product. The report names the mode.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

SEASON_ID = 1
SEED = 20261130
MAX_POINTS = 1_000_000
PG_TABLE = "bench_read_scores"
# --names: a second board of the season holds the same scores under these player ids + the
# offset, ids no name was written for, so each read is measured with and without names side by
# side in the same minute (the machine's load moves between minutes more than names do).
UNNAMED_BOARD = "unnamed"
UNNAMED_OFFSET = 1_000_000_000_000
# The suffix of a figure measured on the unnamed board.
NO_NAMES = " · no names"
# --metadata: a board keeping metadata, with main's scores and a stored result per player.
METADATA_BOARD = "with-metadata"
WITH_METADATA = " · metadata"
# --tiebreak: a board with tie-break columns, with main's points and times.
TIEBREAK_BOARD = "tiebreak"
WITH_TIEBREAK = " · tie-break columns"
# --cohort-size: a league board with cohorts, with main's scores.
LEAGUE_BOARD = "league"
WITH_LEAGUE = " · league board"
LEAGUE_TIERS = ("bronze", "silver", "gold")
# As in leaderboard_project/settings.py when REDIS_URL is not set: the local Redis, on the port
# devservices started it on (LB_REDIS_PORT, as the settings read it).
DEFAULT_REDIS_URL = f"redis://127.0.0.1:{os.environ.get('LB_REDIS_PORT') or 6379}/0"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--players", type=int, default=10_000_000)
    parser.add_argument("--duration", type=int, default=10, help="seconds per wrk run")
    parser.add_argument("--connections", type=int, default=8, help="wrk connections")
    parser.add_argument("--threads", type=int, default=2, help="wrk threads")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--iterations", type=int, default=2000, help="Python samples per op")
    parser.add_argument("--pg-samples", type=int, default=20, help="PostgreSQL rank samples")
    parser.add_argument("--redis-db", type=int, default=12)
    parser.add_argument("--database", default="lb_bench_read")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--reload", action="store_true", help="reload the data sets")
    parser.add_argument("--cleanup", action="store_true", help="drop the data sets at the end")
    parser.add_argument("--skip-http", action="store_true")
    parser.add_argument("--skip-pg", action="store_true")
    parser.add_argument(
        "--names",
        action="store_true",
        help="measure without names, then again with a name for every player in the cache",
    )
    parser.add_argument(
        "--metadata",
        action="store_true",
        help="also measure the selectors on a board that keeps metadata (same scores as main)",
    )
    parser.add_argument(
        "--tiebreak",
        type=int,
        choices=[0, 1, 2, 3],
        default=0,
        help="also measure the selectors on a board ranked by points and this many tie-break "
        "columns (main's points and times, random column values)",
    )
    parser.add_argument(
        "--cohort-size",
        type=int,
        default=0,
        help="also measure the cohort reads on a league board of cohorts of this many (main's "
        "scores, every player in a cohort), against the player entry",
    )
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="the board on the local Redis Cluster: the same as exporting "
        "LB_REDIS_MODE=cluster LB_KAFKA_BROKERS=3",
    )
    args = parser.parse_args()
    # Said before minutes of loading data, not as a traceback at the HTTP part.
    if not args.skip_http and shutil.which("wrk") is None:
        parser.error("the HTTP part needs wrk (Debian: apt-get install wrk); or pass --skip-http")
    return args


def _redis_db_url(url: str, db: int) -> str:
    """``url`` (a redis:// URL) with its database number replaced by ``db``."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{db}", parts.query, parts.fragment))


def configure(args: argparse.Namespace) -> None:
    """Environment for this process and the gunicorn it starts (settings.py reads it).

    The servers are the ones the environment names (``REDIS_URL``, ``DATABASE_URL``), as for
    every process of the project; only the Redis db and the database are the bench's own.
    """
    from bench.database import bench_database_url

    if args.cluster:
        os.environ.update({"LB_REDIS_MODE": "cluster", "LB_KAFKA_BROKERS": "3"})
    redis_url = os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL
    # In cluster mode the boards are on the cluster and REDIS_URL serves nothing of this bench.
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "bench.read.settings",
            "REDIS_URL": _redis_db_url(redis_url, args.redis_db),
            # Created on that server if it does not exist.
            "DATABASE_URL": bench_database_url(name=args.database),
            "LEADERBOARD_KEY_PREFIX": "bench",
            "DJANGO_DEBUG": "false",
            "DJANGO_SECRET_KEY": "bench-read-only-not-a-secret-" + "x" * 32,
            "API_ANON_THROTTLE_RATE": "1000000000/min",
            "LOG_LEVEL": "WARNING",
        }
    )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def ensure_season() -> Any:
    from django.utils import timezone

    from leaderboard.services import season_setup
    from seasons.models import Season, SeasonStatus

    season = Season.objects.filter(id=SEASON_ID).first()
    if season is None:
        now = timezone.now()
        season = season_setup(
            season_id=SEASON_ID,
            name="Bench season",
            starts_at=now - timedelta(days=1),
            ends_at=now + timedelta(days=89),
        )
    season.status = SeasonStatus.ACTIVE
    season.save(update_fields=["status"])
    return season


def unnamed_board(args: argparse.Namespace) -> Any:
    """With --names: the season's board of the same scores under ids without names."""
    if not args.names:
        return None
    from leaderboard.models import Board
    from leaderboard.selectors.boards import BoardRef
    from leaderboard.services import board_create

    board = Board.objects.filter(season_id=SEASON_ID, slug=UNNAMED_BOARD).first()
    if board is None:
        board = board_create(season_id=SEASON_ID, slug=UNNAMED_BOARD, name="Without names")
    return BoardRef.from_model(Board.objects.select_related("season").get(id=board.id))


def metadata_board(args: argparse.Namespace) -> Any:
    """With --metadata: the season's board that keeps metadata."""
    if not args.metadata:
        return None
    from leaderboard.models import Board
    from leaderboard.selectors.boards import BoardRef
    from leaderboard.services import board_create

    board = Board.objects.filter(season_id=SEASON_ID, slug=METADATA_BOARD).first()
    if board is None:
        board = board_create(
            season_id=SEASON_ID, slug=METADATA_BOARD, name="With metadata", keeps_metadata=True
        )
    return BoardRef.from_model(Board.objects.select_related("season").get(id=board.id))


def tiebreak_board(args: argparse.Namespace) -> Any:
    """With --tiebreak: the season's board with that many tie-break columns."""
    if not args.tiebreak:
        return None
    from leaderboard.models import Board, TiebreakColumn
    from leaderboard.selectors.boards import BoardRef
    from leaderboard.services import board_create

    columns = [("kills", "desc"), ("deaths", "asc"), ("assists", "desc")][: args.tiebreak]
    wanted = [{"name": n, "order": o} for n, o in columns]
    board = Board.objects.filter(season_id=SEASON_ID, slug=TIEBREAK_BOARD).first()
    if board is not None and board.tiebreak_columns != wanted:
        board.delete()
        board = None
    if board is None:
        board = board_create(
            season_id=SEASON_ID,
            slug=TIEBREAK_BOARD,
            name="With tie-break columns",
            tiebreaks=[TiebreakColumn(n, o) for n, o in columns],
        )
    return BoardRef.from_model(Board.objects.select_related("season").get(id=board.id))


def tiebreak_load(args: argparse.Namespace) -> None:
    """With --tiebreak: main's points and times on the tie-break board, random column values,
    written as the board keeps them (members ``key + player`` at score 0, and the index)."""
    from tqdm import tqdm

    from leaderboard import keys
    from leaderboard.redis import get_board_redis
    from leaderboard.selectors.boards import main_board_get
    from leaderboard.services import board_mark_intact

    board = tiebreak_board(args)
    if board is None:
        return
    wide = board.wide_codec
    assert wide is not None
    client = get_board_redis()
    main = main_board_get(season_id=SEASON_ID)
    main_key, key = keys.board(board_id=main.id), keys.board(board_id=board.id)
    index = keys.board_index(board_key=key)
    board_mark_intact(board_id=board.id)
    if client.zcard(key) == args.players and not args.reload:
        print(f"reusing the tie-break board of {args.players:,} players")
        return
    client.unlink(key, index)
    rng = random.Random(SEED + 3)
    codec = main.codec
    started = time.perf_counter()
    with tqdm(total=args.players, unit="player", desc="tie-break board") as progress:
        cursor = 0
        while True:
            cursor, chunk = client.zscan(main_key, cursor, count=20_000)
            if chunk:
                players = [int(m) for m, _ in chunk]
                decoded = [codec.decode(int(score)) for _, score in chunk]
                wide_keys = wide.keys_of(
                    points=[d.points for d in decoded],
                    tiebreakers=[[rng.randrange(50) for _ in range(wide.columns)] for _ in chunk],
                    ticks=[d.elapsed_ticks for d in decoded],
                )
                pipe = client.pipeline(transaction=False)
                pipe.zadd(key, {f"{k}{p}": 0 for k, p in zip(wide_keys, players, strict=True)})
                pipe.hset(index, mapping=dict(zip(map(str, players), wide_keys, strict=True)))
                pipe.execute()
                progress.update(len(chunk))
            if cursor == 0:
                break
    print(f"tie-break board loaded in {time.perf_counter() - started:.0f}s")


def league_board(args: argparse.Namespace) -> Any:
    """With --cohort-size: the season's league board of cohorts of that many."""
    if not args.cohort_size:
        return None
    from leaderboard.models import Board
    from leaderboard.selectors.boards import BoardRef
    from leaderboard.services import board_create
    from seasons.leagues import LeagueSpec

    board = Board.objects.filter(season_id=SEASON_ID, slug=LEAGUE_BOARD).first()
    if board is not None and board.cohort_size != args.cohort_size:
        board.delete()
        board = None
    if board is None:
        board = board_create(
            season_id=SEASON_ID,
            slug=LEAGUE_BOARD,
            name="League",
            cohort_size=args.cohort_size,
            league=LeagueSpec(LEAGUE_TIERS, 20, 20),
        )
    return BoardRef.from_model(Board.objects.select_related("season").get(id=board.id))


def league_load(args: argparse.Namespace) -> None:
    """With --cohort-size: main's scores on the league board, and every player in a cohort
    (players in id order; cohort n in tier n mod 3), written as the assignment writes them."""
    import psycopg
    from django.conf import settings
    from tqdm import tqdm

    from leaderboard import keys
    from leaderboard.models import Cohort, CohortMember
    from leaderboard.redis import get_board_redis
    from leaderboard.selectors.boards import main_board_get
    from leaderboard.services import board_mark_intact

    board = league_board(args)
    if board is None:
        return
    client = get_board_redis()
    main_key, key = (
        keys.board(board_id=main_board_get(season_id=SEASON_ID).id),
        keys.board(board_id=board.id),
    )
    board_mark_intact(board_id=board.id)
    size = args.cohort_size
    cohorts = -(-args.players // size)
    members = CohortMember.objects.filter(board_id=board.id).count()
    if client.zcard(key) == args.players and members == args.players and not args.reload:
        print(f"reusing the league board of {args.players:,} players")
        return
    client.unlink(key)
    Cohort.objects.filter(board_id=board.id).delete()
    started = time.perf_counter()
    pg = psycopg.connect(settings.DATABASE_URL, autocommit=True)
    with pg.cursor().copy(
        f"COPY {Cohort._meta.db_table} (board_id, number, tier, members, opened_at) FROM STDIN"
    ) as copy:
        for number in range(1, cohorts + 1):
            fill = min(size, args.players - (number - 1) * size)
            copy.write_row((board.id, number, (number - 1) % 3, fill, "now"))
    ids = dict(Cohort.objects.filter(board_id=board.id).values_list("number", "id"))
    with (
        tqdm(total=args.players, unit="player", desc="league board") as progress,
        pg.cursor().copy(
            f"COPY {CohortMember._meta.db_table} (board_id, cohort_id, player_id, joined_at) "
            "FROM STDIN"
        ) as copy,
    ):
        for player in range(1, args.players + 1):
            copy.write_row((board.id, ids[(player - 1) // size + 1], player, "now"))
            if player % 100_000 == 0:
                progress.update(100_000)
    pg.execute(f"VACUUM ANALYZE {CohortMember._meta.db_table}")
    pg.close()
    cursor = 0
    while True:
        cursor, chunk = client.zscan(main_key, cursor, count=20_000)
        if chunk:
            client.zadd(key, {str(int(member)): float(score) for member, score in chunk})
        if cursor == 0:
            break
    print(f"league board loaded in {time.perf_counter() - started:.0f}s")


def bytes_per_player(board_keys: list[str]) -> float:
    """MEMORY USAGE of a board's keys (SAMPLES 0: exact) over its players."""
    from leaderboard.redis import get_board_redis

    client = get_board_redis()
    members = int(client.zcard(board_keys[0]))
    used = sum(int(client.memory_usage(k, samples=0) or 0) for k in board_keys)
    return round(used / members, 1) if members else 0.0


def metadata_load(args: argparse.Namespace, season: Any) -> None:
    """With --metadata: main's scores on the metadata board, and one result per player in
    PostgreSQL whose points and time are the entry's (its deciding result)."""
    import uuid

    import psycopg
    from django.conf import settings
    from tqdm import tqdm

    from leaderboard import keys
    from leaderboard.models import MatchResult
    from leaderboard.redis import get_board_redis
    from leaderboard.selectors.boards import main_board_get
    from leaderboard.services import board_mark_intact

    board = metadata_board(args)
    if board is None:
        return
    client = get_board_redis()
    main_key = keys.board(board_id=main_board_get(season_id=SEASON_ID).id)
    key = keys.board(board_id=board.id)
    board_mark_intact(board_id=board.id)
    stored = MatchResult.objects.filter(board_id=board.id).count()
    if client.zcard(key) == args.players and stored == args.players and not args.reload:
        print(f"reusing the metadata board of {args.players:,} players")
        return
    client.unlink(key)
    MatchResult.objects.filter(board_id=board.id).delete()
    codec, starts_at = board.codec, season.starts_at
    table = MatchResult._meta.db_table
    pg = psycopg.connect(settings.DATABASE_URL, autocommit=True)
    cars = ("Aster GT", "Boreal R", "Cinder S", "Drift 86", "Ember RS", "Falcon V8")
    started = time.perf_counter()
    with tqdm(total=args.players, unit="player", desc="metadata") as progress:
        cursor = 0
        while True:
            # main's entries in member order, a chunk at a time: the same scores, and a result
            # behind each.
            cursor, chunk = client.zscan(main_key, cursor, count=20_000)
            if chunk:
                entries = [
                    (m.decode() if isinstance(m, bytes) else str(m), float(score))
                    for m, score in chunk
                ]
                client.zadd(key, dict(entries))
                with pg.cursor().copy(
                    f"COPY {table} (match_id, player_id, season_id, board_id, points, "
                    "achieved_at, ingested_at, void_reason, metadata) FROM STDIN"
                ) as copy:
                    for member, score in entries:
                        decoded = codec.decode(int(score))
                        player = int(member)
                        at = starts_at + decoded.elapsed
                        metadata = json.dumps(
                            {"car": cars[player % len(cars)], "replay": f"r-{player:012d}"}
                        )
                        copy.write_row(
                            (uuid.uuid4(), player, SEASON_ID, board.id, decoded.points, at, at,
                             "", metadata)
                        )  # fmt: skip
                progress.update(len(chunk))
            if cursor == 0:
                break
    pg.execute(f"VACUUM ANALYZE {table}")
    pg.close()
    print(f"metadata board loaded in {time.perf_counter() - started:.0f}s")


def load(args: argparse.Namespace, season: Any) -> None:
    """Random board of ``args.players``: pipelined ZADDs and a PostgreSQL COPY of the same rows."""
    import psycopg
    from django.conf import settings
    from tqdm import tqdm

    from leaderboard import keys
    from leaderboard.redis import get_board_redis
    from leaderboard.selectors.boards import main_board_get
    from leaderboard.services import board_mark_intact

    client = get_board_redis()
    board = main_board_get(season_id=SEASON_ID)
    key = keys.board(board_id=board.id)
    unnamed = unnamed_board(args)
    unnamed_key = None if unnamed is None else keys.board(board_id=unnamed.id)
    codec = board.codec
    pg = psycopg.connect(settings.DATABASE_URL, autocommit=True)
    pg.execute(
        f"CREATE TABLE IF NOT EXISTS {PG_TABLE} "
        "(season_id int NOT NULL, player_id bigint NOT NULL, points int NOT NULL, "
        "score bigint NOT NULL)"
    )
    # The synthetic board stands for the truth: marked intact, or every read would answer 503
    # (docs/read-api.md). No recovery task may run meanwhile: it would rebuild it from
    # PostgreSQL, where this board has no results.
    board_mark_intact(board_id=board.id)
    redis_ok = client.zcard(key) == args.players
    if unnamed is not None and unnamed_key is not None:
        board_mark_intact(board_id=unnamed.id)
        redis_ok = redis_ok and client.zcard(unnamed_key) == args.players
    pg_count = pg.execute(f"SELECT count(*) FROM {PG_TABLE}").fetchone()
    pg_ok = args.skip_pg or (pg_count is not None and pg_count[0] == args.players)
    if redis_ok and pg_ok and not args.reload:
        print(f"reusing the loaded board of {args.players:,} players")
        pg.close()
        return
    client.unlink(key)
    if unnamed_key is not None:
        client.unlink(unnamed_key)
    if not args.skip_pg:
        pg.execute(f"DROP INDEX IF EXISTS {PG_TABLE}_rank_idx")
        pg.execute(f"DROP INDEX IF EXISTS {PG_TABLE}_player_idx")
        pg.execute(f"TRUNCATE {PG_TABLE}")
    rng = random.Random(SEED)
    max_ticks = min(codec.max_ticks, 90 * 86400)
    chunk = 20_000
    started = time.perf_counter()
    with tqdm(total=args.players, unit="player", desc="load") as progress:
        for first in range(1, args.players + 1, chunk):
            last = min(first + chunk, args.players + 1)
            rows = []
            for player in range(first, last):
                points = rng.randint(0, MAX_POINTS)
                score = codec.encode(points=points, elapsed_ticks=rng.randint(0, max_ticks))
                rows.append((player, points, score))
            client.zadd(key, {str(player): score for player, _, score in rows})
            if unnamed_key is not None:
                client.zadd(
                    unnamed_key,
                    {str(UNNAMED_OFFSET + player): score for player, _, score in rows},
                )
            if not args.skip_pg:
                with pg.cursor().copy(
                    f"COPY {PG_TABLE} (season_id, player_id, points, score) FROM STDIN"
                ) as copy:
                    for player, points, score in rows:
                        copy.write_row((SEASON_ID, player, points, score))
            progress.update(len(rows))
    print(f"loaded in {time.perf_counter() - started:.0f}s; indexing PostgreSQL ...")
    if not args.skip_pg:
        started = time.perf_counter()
        pg.execute(f"CREATE INDEX {PG_TABLE}_rank_idx ON {PG_TABLE} (season_id, score DESC)")
        pg.execute(
            f"CREATE UNIQUE INDEX {PG_TABLE}_player_idx ON {PG_TABLE} (season_id, player_id)"
        )
        pg.execute(f"VACUUM ANALYZE {PG_TABLE}")
        print(f"indexed in {time.perf_counter() - started:.0f}s")
    pg.close()


# --- names ---------------------------------------------------------------------------------------

_COUNTRIES = ["FR", "DE", "US", "JP", "BR", "KR", "SE", "PL", "TR", "CA", None]


def _name_buckets(players: int) -> Iterator[tuple[str, dict[Any, Any]]]:
    """Each bucket of the name cache with a name and country for each of its players (names of
    8 to 16 characters, like the simulator's, 12.7 on average), one bucket at a time."""
    from leaderboard import keys
    from leaderboard.keys import PLAYER_NAMES_BUCKET_SIZE
    from leaderboard.player_names import player_name_encode

    rng = random.Random(SEED + 1)
    for first in range(0, players + 1, PLAYER_NAMES_BUCKET_SIZE):
        fields = {
            str(player): player_name_encode(
                revision=1,
                display_name=f"P{player}-" + "x" * rng.randint(0, 8),
                country=rng.choice(_COUNTRIES),
            )
            for player in range(max(first, 1), min(first + PLAYER_NAMES_BUCKET_SIZE, players + 1))
        }
        if fields:
            yield keys.player_names(player_id=first), fields


def names_load(args: argparse.Namespace) -> None:
    """A name and country for every player, straight into the name cache's buckets (what the
    cache holds once every player has a profile; PostgreSQL plays no part in the reads)."""
    from tqdm import tqdm

    from leaderboard.redis import get_board_redis

    client = get_board_redis()
    pipe = client.pipeline(transaction=False)
    with tqdm(total=args.players, unit="player", desc="names") as progress:
        for key, fields in _name_buckets(args.players):
            pipe.hset(key, mapping=fields)
            progress.update(len(fields))
            if len(pipe) >= 500:
                pipe.execute()
        pipe.execute()


# --- timing --------------------------------------------------------------------------------------


def timed(fn: Callable[[], Any], iterations: int, budget_s: float = 60.0) -> dict[str, float]:
    samples: list[float] = []
    deadline = time.perf_counter() + budget_s
    for _ in range(iterations):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
        if time.perf_counter() > deadline:
            break
    return _stats(samples)


def _stats(samples: list[float]) -> dict[str, float]:
    samples = sorted(samples)
    return {
        "n": len(samples),
        "p50_ms": statistics.median(samples),
        "p99_ms": samples[min(len(samples) - 1, int(len(samples) * 0.99))],
        "ops_s": 1000 / statistics.fmean(samples),
    }


def timed_in_turn(
    first: Callable[[], Any], second: Callable[[], Any], iterations: int
) -> tuple[dict[str, float], dict[str, float]]:
    """``timed`` of two operations called in turn, one of each per iteration."""
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(iterations):
        for fn, into in ((first, samples[0]), (second, samples[1])):
            start = time.perf_counter()
            fn()
            into.append((time.perf_counter() - start) * 1000)
    return _stats(samples[0]), _stats(samples[1])


def python_benchmarks(args: argparse.Namespace, season: Any) -> dict[str, dict[str, float]]:
    import psycopg
    from django.conf import settings

    from leaderboard import keys
    from leaderboard.player_names import player_names_get
    from leaderboard.redis import get_board_redis
    from leaderboard.selectors import boards, rankings

    ref = boards.board_get_cached(season_id=SEASON_ID)
    assert ref is not None
    client = get_board_redis()
    key = keys.board(board_id=ref.id)
    rng = random.Random(1)

    def player() -> int:
        return rng.randint(1, args.players)

    def friends() -> list[int]:
        return [player() for _ in range(200)]

    n = args.iterations
    results: dict[str, dict[str, float]] = {}
    print("timing raw Redis and the selectors ...")
    results["redis: ZREVRANGE 0 99"] = timed(
        lambda: client.zrevrange(key, 0, 99, withscores=True), n
    )
    results["redis: ZREVRANK"] = timed(lambda: client.zrevrank(key, str(player())), n)
    results["redis: ZMSCORE 200"] = timed(
        lambda: client.zmscore(key, [str(p) for p in friends()]), n
    )
    # With --names each selector runs on the unnamed board first, then on the named one: the
    # figure "without names" and the one with share the minute's load.
    targets = [("", ref, key, 0)]
    unnamed = unnamed_board(args)
    if unnamed is not None:
        targets.insert(0, (NO_NAMES, unnamed, keys.board(board_id=unnamed.id), UNNAMED_OFFSET))
    with_metadata = metadata_board(args)
    if with_metadata is not None:
        targets.append((WITH_METADATA, with_metadata, keys.board(board_id=with_metadata.id), 0))
    with_tiebreak = tiebreak_board(args)
    if with_tiebreak is not None:
        targets.append((WITH_TIEBREAK, with_tiebreak, keys.board(board_id=with_tiebreak.id), 0))
    selectors: list[tuple[str, Callable[[Any, str, int], Callable[[], Any]], int]] = [
        (
            "selector: top 100 (live, Lua)",
            lambda b, k, o: (
                lambda: rankings.board_page_get(board=b, board_key=k, start=0, count=100)
            ),
            n,
        ),
        (
            "selector: player entry (Lua)",
            lambda b, k, o: lambda: rankings.board_player_get(board=b, player_id=o + player()),
            n,
        ),
        (
            "selector: around r=5 (Lua)",
            lambda b, k, o: (
                lambda: rankings.board_around_get(board=b, player_id=o + player(), radius=5)
            ),
            n,
        ),
        (
            "selector: friends 200 (Lua)",
            lambda b, k, o: (
                lambda: rankings.board_friends_get(board=b, player_ids=[o + p for p in friends()])
            ),
            max(1, n // 4),
        ),
    ]
    for name, make, iterations in selectors:
        for suffix, board, board_key, offset in targets:
            results[name + suffix] = timed(make(board, board_key, offset), iterations)
    league = league_board(args)
    if league is not None:
        from leaderboard.selectors import cohorts

        # The league board's player entry and the player's cohort in turn, call by call, so
        # the two share every moment's load (the machine's speed moves within a run); then a
        # cohort's top.
        ref_cohorts = -(-args.players // args.cohort_size)
        (
            results["selector: player entry (Lua)" + WITH_LEAGUE],
            results["selector: player's cohort" + WITH_LEAGUE],
        ) = timed_in_turn(
            lambda: rankings.board_player_get(board=league, player_id=player()),
            lambda: cohorts.player_cohort_get(board=league, player_id=player()),
            n,
        )
        results["selector: cohort top" + WITH_LEAGUE] = timed(
            lambda: cohorts.cohort_standing_get(
                board=league, number=rng.randint(1, ref_cohorts), limit=50
            ),
            n,
        )
    # The names' own round trip, which each of the reads above includes (rankings.entries_named).
    results["names: 1 id (HMGET)"] = timed(lambda: player_names_get(player_ids=[player()]), n)
    results["names: 11 ids in a row"] = timed(
        lambda: player_names_get(player_ids=list(range(start := player(), start + 11))), n
    )
    results["names: 200 ids (scattered)"] = timed(
        lambda: player_names_get(player_ids=friends()), max(1, n // 4)
    )
    if args.skip_pg:
        return results
    print("timing the PostgreSQL-only implementation ...")
    pg = psycopg.connect(settings.DATABASE_URL, autocommit=True)
    rank_sql = (
        f"SELECT count(*) + 1 FROM {PG_TABLE} WHERE season_id = %(s)s AND score > "
        f"(SELECT score FROM {PG_TABLE} WHERE season_id = %(s)s AND player_id = %(p)s)"
    )

    def pg_top() -> None:
        pg.execute(
            f"SELECT player_id, points FROM {PG_TABLE} WHERE season_id = %s "
            "ORDER BY score DESC LIMIT 100",
            [SEASON_ID],
        ).fetchall()

    def pg_rank() -> None:
        pg.execute(rank_sql, {"s": SEASON_ID, "p": player()}).fetchone()

    def pg_around() -> None:
        me = player()
        row = pg.execute(
            f"SELECT score FROM {PG_TABLE} WHERE season_id = %s AND player_id = %s",
            [SEASON_ID, me],
        ).fetchone()
        assert row is not None
        pg.execute(rank_sql, {"s": SEASON_ID, "p": me}).fetchone()
        pg.execute(
            f"SELECT player_id, points FROM {PG_TABLE} WHERE season_id = %s AND score > %s "
            "ORDER BY score ASC LIMIT 5",
            [SEASON_ID, row[0]],
        ).fetchall()
        pg.execute(
            f"SELECT player_id, points FROM {PG_TABLE} WHERE season_id = %s AND score < %s "
            "ORDER BY score DESC LIMIT 5",
            [SEASON_ID, row[0]],
        ).fetchall()

    def pg_friends() -> None:
        pg.execute(
            f"SELECT f.player_id, f.points, (SELECT count(*) + 1 FROM {PG_TABLE} o "
            "WHERE o.season_id = f.season_id AND o.score > f.score) "
            f"FROM {PG_TABLE} f WHERE f.season_id = %s AND f.player_id = ANY(%s)",
            [SEASON_ID, friends()],
        ).fetchall()

    samples = args.pg_samples
    results["postgres: top 100"] = timed(pg_top, max(samples, 100))
    results["postgres: rank (count above)"] = timed(pg_rank, samples)
    results["postgres: around r=5"] = timed(pg_around, samples)
    results["postgres: friends 200"] = timed(pg_friends, max(1, samples // 10), budget_s=120)
    pg.close()
    return results


# --- HTTP ----------------------------------------------------------------------------------------

_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _ms(text: str) -> float:
    match = re.fullmatch(r"([0-9.]+)(us|ms|s)", text)
    assert match, text
    return float(match[1]) * _UNITS[match[2]]


def wrk(
    args: argparse.Namespace,
    path: str,
    script_args: list[str] | None = None,
    *,
    threads: int,
    connections: int,
    seconds: int | None = None,
) -> dict[str, float]:
    command = [
        "wrk",
        f"-t{threads}",
        f"-c{connections}",
        f"-d{seconds or args.duration}s",
        "--latency",
    ]
    if script_args is not None:
        command += ["-s", str(Path(__file__).with_name("random_path.lua"))]
    command.append(f"http://127.0.0.1:{args.port}{path if script_args is None else '/'}")
    if script_args is not None:
        command += ["--", *script_args]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    percentiles = dict(re.findall(r"^\s+(50|99)%\s+(\S+)$", output, flags=re.M))
    rps = re.search(r"Requests/sec:\s+([0-9.]+)", output)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    assert rps, output
    assert percentiles, output
    return {
        "rps": float(rps[1]),
        "p50_ms": _ms(percentiles["50"]),
        "p99_ms": _ms(percentiles["99"]),
        "non_2xx": float(errors[1]) if errors else 0.0,
    }


def http_benchmarks(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    import urllib.request

    from leaderboard.services import top_snapshots_refresh

    stop = threading.Event()

    def refresher() -> None:
        # What beat does with leaderboard.tasks.refresh_top_snapshots.
        while not stop.is_set():
            top_snapshots_refresh()
            stop.wait(1.0)

    thread = threading.Thread(target=refresher, daemon=True)
    thread.start()
    server = subprocess.Popen(
        [
            str(ROOT / ".venv/bin/gunicorn"),
            "leaderboard_project.wsgi:application",
            "--bind",
            f"127.0.0.1:{args.port}",
            "--workers",
            str(args.workers),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=os.environ.copy(),
    )
    base = f"http://127.0.0.1:{args.port}"
    board = f"/api/seasons/{SEASON_ID}/leaderboard"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{base}/bench/bare", timeout=1) as response:  # noqa: S310
                    if response.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        with urllib.request.urlopen(f"{base}{board}/top?limit=100") as response:  # noqa: S310
            source = response.headers["X-Leaderboard-Source"]
        print(f"gunicorn up ({args.workers} workers); top list source: {source}")
        rng = random.Random(2)
        friends = [rng.randint(1, args.players) for _ in range(200)]

        def board_runs(base_path: str, offset: int) -> dict[str, tuple[list[str], Any]]:
            ids = ",".join(str(offset + friend) for friend in friends)
            around = f"{base_path}/players/{{id}}/around?radius=5"
            return {
                "top 100 (snapshot)": ([f"{base_path}/top?limit=100"], None),
                "player entry": (
                    [""],
                    [f"{base_path}/players/{{id}}", str(args.players), str(offset)],
                ),
                "around r=5": ([""], [around, str(args.players), str(offset)]),
                "friends 200": ([f"{base_path}/friends?ids={ids}"], None),
            }

        named = board_runs(board, 0)
        if args.cohort_size:
            league = f"/api/seasons/{SEASON_ID}/boards/{LEAGUE_BOARD}"
            named["player entry" + WITH_LEAGUE] = (
                [""],
                [f"{league}/players/{{id}}", str(args.players), "0"],
            )
            named["player's cohort" + WITH_LEAGUE] = (
                [""],
                [f"{league}/players/{{id}}/cohort", str(args.players), "0"],
            )
        unnamed = (
            board_runs(f"/api/seasons/{SEASON_ID}/boards/{UNNAMED_BOARD}", UNNAMED_OFFSET)
            if args.names
            else {}
        )
        runs: dict[str, tuple[list[str], Any]] = {"bare Django view": (["/bench/bare"], None)}
        for name, run in named.items():
            # Without names first, then with, back to back (see UNNAMED_BOARD).
            if name in unnamed:
                runs[name + NO_NAMES] = unnamed[name]
            runs[name] = run
        results: dict[str, dict[str, float]] = {}
        for name, (paths, script_args) in runs.items():
            print(f"wrk: {name} ...")
            results[f"{name} · load"] = wrk(
                args, paths[0], script_args, threads=args.threads, connections=args.connections
            )
            # One connection: latency without queueing behind other requests.
            results[f"{name} · 1 conn"] = wrk(args, paths[0], script_args, threads=1, connections=1)
        if args.cohort_size:
            results.update(cohort_slices(args, named))
        return results
    finally:
        stop.set()
        server.terminate()
        server.wait(timeout=30)


COHORT_SLICES = 6
COHORT_SLICE_SECONDS = 2


def cohort_slices(
    args: argparse.Namespace, runs: dict[str, tuple[list[str], Any]]
) -> dict[str, dict[str, float]]:
    """The league board's player entry and the player's cohort over one connection again, in
    COHORT_SLICES short wrk runs each, taken in turn: each slice's p50, and their medians, so
    that a drift of the machine's speed within the run weighs on both alike."""
    names = ("player entry" + WITH_LEAGUE, "player's cohort" + WITH_LEAGUE)
    slices: dict[str, list[float]] = {name: [] for name in names}
    for number in range(COHORT_SLICES):
        print(f"wrk: cohort against entry, slice {number + 1} of {COHORT_SLICES} ...")
        for name in names:
            paths, script_args = runs[name]
            measured = wrk(
                args,
                paths[0],
                script_args,
                threads=1,
                connections=1,
                seconds=COHORT_SLICE_SECONDS,
            )
            slices[name].append(measured["p50_ms"])
    return {
        f"{name} · 1 conn, in turn": {
            "p50_ms": statistics.median(values),
            "slices_p50_ms": values,  # type: ignore[dict-item]
        }
        for name, values in slices.items()
    }


def cleanup(args: argparse.Namespace) -> None:
    """Every key under the ``bench`` prefix (on a cluster: on every master, since redis-py sends
    SCAN to all primaries; one UNLINK per key, so each stays within one slot), and the table."""
    import psycopg
    from django.conf import settings

    from leaderboard import keys
    from leaderboard.redis import get_board_redis

    client = get_board_redis()
    pipe = client.pipeline(transaction=False)
    for key in client.scan_iter(match=keys.prefix_pattern(), count=1000):
        pipe.unlink(key)
        if len(pipe) >= 500:
            pipe.execute()
    pipe.execute()
    with psycopg.connect(settings.DATABASE_URL, autocommit=True) as pg:
        pg.execute(f"DROP TABLE IF EXISTS {PG_TABLE}")


def table(title: str, rows: dict[str, dict[str, float]], columns: list[str]) -> str:
    lines = [f"**{title}**", "", "| operation | " + " | ".join(columns) + " |"]
    lines.append("| --- |" + " ---: |" * len(columns))
    for name, values in rows.items():
        cells = []
        for column in columns:
            value = values.get(column)
            if value is None:  # the slices taken in turn have a p50 only
                cells.append("")
                continue
            cells.append(
                f"{value:,.0f}" if column in {"rps", "ops_s", "n", "non_2xx"} else f"{value:.3f}"
            )
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summarize(report: dict[str, Any]) -> list[str]:
    """The read path's targets (docs/benchmarks.md), computed from figures of this run."""
    python = report["python"]
    lines = [
        f"selector p99: player entry {python['selector: player entry (Lua)']['p99_ms']:.3f} ms, "
        f"around {python['selector: around r=5 (Lua)']['p99_ms']:.3f} ms (target <= 1 ms)",
    ]
    if "postgres: rank (count above)" in python:
        ratio = (
            python["postgres: rank (count above)"]["p50_ms"] / python["redis: ZREVRANK"]["p50_ms"]
        )
        lines.append(f"rank p50: PostgreSQL / ZREVRANK = {ratio:,.0f}x (target >= 1000x at 10M)")
    http = report.get("http")
    if http:
        rtt = python["redis: ZREVRANK"]["p50_ms"]
        bare = http["bare Django view · 1 conn"]["p50_ms"]
        player = http["player entry · 1 conn"]["p50_ms"]
        lines.append(
            f"player entry p50 (1 conn) {player:.3f} ms vs 2 x (bare {bare:.3f} + Redis RTT "
            f"{rtt:.3f}) = {2 * (bare + rtt):.3f} ms"
        )
        top = http["top 100 (snapshot) · load"]["rps"] / http["bare Django view · load"]["rps"]
        lines.append(f"top-100 throughput = {top:.0%} of the bare view's (target >= 50%)")
    return lines


# (the report's part, the operation, the figure compared, its label, the target: at most or at
# least that ratio of the figure with names to the one without)
_NAMES_TARGETS = [
    ("http", "player entry", " · 1 conn", "p50_ms", "player entry p50 (1 conn)", "<=", 1.25),
    ("http", "around r=5", " · 1 conn", "p50_ms", "around r=5 p50 (1 conn)", "<=", 1.25),
    ("http", "friends 200", " · 1 conn", "p50_ms", "friends 200 p50 (1 conn)", "<=", 1.25),
    ("http", "top 100 (snapshot)", " · load", "rps", "top-100 throughput (load)", ">=", 0.9),
    ("python", "selector: player entry (Lua)", "", "p50_ms", "selector player p50", "<=", 1.25),
    ("python", "selector: around r=5 (Lua)", "", "p50_ms", "selector around p50", "<=", 1.25),
    ("python", "selector: friends 200 (Lua)", "", "p50_ms", "selector friends p50", "<=", 1.25),
]


def summarize_names(report: dict[str, Any]) -> list[str]:
    """Each figure on the named board against the same figure on the unnamed one."""
    lines = []
    for part, operation, mode, column, label, sense, target in _NAMES_TARGETS:
        rows = report.get(part)
        if not rows:
            continue
        before = rows[operation + NO_NAMES + mode][column]
        after = rows[operation + mode][column]
        unit = "req/s" if column == "rps" else "ms"
        lines.append(
            f"names: {label} {after:,.3f} {unit} with vs {before:,.3f} without = "
            f"{after / before:.2f}x (target {sense} {target}x)"
        )
    return lines


_BOARD_OPERATIONS = [
    ("selector: top 100 (live, Lua)", "page of 100 p50"),
    ("selector: player entry (Lua)", "player entry p50"),
    ("selector: around r=5 (Lua)", "around r=5 p50"),
    ("selector: friends 200 (Lua)", "friends 200 p50"),
]


def summarize_against_main(report: dict[str, Any], *, suffix: str, label: str) -> list[str]:
    """Each selector on the board measured under ``suffix`` against the same selector on
    main, p50."""
    rows = report["python"]
    lines = []
    for operation, name in _BOARD_OPERATIONS:
        before = rows[operation]["p50_ms"]
        after = rows[operation + suffix]["p50_ms"]
        lines.append(
            f"{label}: {name} {after:,.3f} ms vs {before:,.3f} on main = {after / before:.2f}x"
        )
    return lines


def summarize_tiebreak(report: dict[str, Any]) -> list[str]:
    """The tie-break board's selectors against main's, and both boards' Redis bytes."""
    lines = summarize_against_main(report, suffix=WITH_TIEBREAK, label="tie-break columns")
    sizes = report.get("bytes_per_player", {})
    if sizes:
        lines.append(
            "Redis bytes per player: " + ", ".join(f"{name} {n:,.1f}" for name, n in sizes.items())
        )
    return lines


def summarize_cohorts(report: dict[str, Any]) -> list[str]:
    """The cohort read against the player entry (on main, and on the league board itself)."""
    python = report["python"]
    cohort = python["selector: player's cohort" + WITH_LEAGUE]["p50_ms"]
    lines = []
    for label, operation in (
        ("main", "selector: player entry (Lua)"),
        ("the league board", "selector: player entry (Lua)" + WITH_LEAGUE),
    ):
        entry = python[operation]["p50_ms"]
        lines.append(
            f"cohorts: selector player's cohort p50 {cohort:.3f} ms vs player entry on {label} "
            f"{entry:.3f} ms = {cohort / entry:.2f}x (target <= 1.5x)"
        )
    http = report.get("http")
    in_turn = (http or {}).get("player's cohort" + WITH_LEAGUE + " · 1 conn, in turn")
    if http and in_turn:
        entry_slices = http["player entry" + WITH_LEAGUE + " · 1 conn, in turn"]["slices_p50_ms"]
        ratios = [c / e for c, e in zip(in_turn["slices_p50_ms"], entry_slices, strict=True)]
        entry = statistics.median(entry_slices)
        lines.append(
            f"cohorts: HTTP in turn ({len(ratios)} slices of {COHORT_SLICE_SECONDS} s each, 1 "
            f"conn): player's cohort p50 {in_turn['p50_ms']:.3f} ms vs player entry on the "
            f"league board {entry:.3f} ms = {in_turn['p50_ms'] / entry:.2f}x (slices "
            f"{min(ratios):.2f}x to {max(ratios):.2f}x; target <= 1.5x)"
        )
    if http:
        cohort = http["player's cohort" + WITH_LEAGUE + " · 1 conn"]["p50_ms"]
        for label, operation in (
            ("main", "player entry · 1 conn"),
            ("the league board", "player entry" + WITH_LEAGUE + " · 1 conn"),
        ):
            entry = http[operation]["p50_ms"]
            lines.append(
                f"cohorts: HTTP player's cohort p50 (1 conn) {cohort:.3f} ms vs player entry "
                f"on {label} {entry:.3f} ms = {cohort / entry:.2f}x (target <= 1.5x)"
            )
    return lines


def describe_redis() -> str:
    """Where the board lives, for the report's heading."""
    from django.conf import settings
    from redis.cluster import RedisCluster

    from leaderboard.redis import get_board_redis

    client = get_board_redis()
    if isinstance(client, RedisCluster):
        nodes = client.get_nodes()
        masters = sum(1 for n in nodes if n.server_type == "primary")
        return (
            f"cluster mode: the board on the Redis Cluster ({masters} masters + "
            f"{len(nodes) - masters} replicas, {', '.join(sorted(n.name for n in nodes))}), "
            f"key prefix {settings.LEADERBOARD_KEY_PREFIX!r}"
        )
    return f"single-node mode: the board on one Redis ({settings.REDIS_URL})"


def main() -> None:
    args = parse_args()
    configure(args)
    season = ensure_season()
    mode = describe_redis()
    print(f"Read benchmark, {mode}")
    load(args, season)
    report: dict[str, Any] = {"players": args.players, "args": vars(args), "mode": mode}
    if args.names:
        names_load(args)
    metadata_load(args, season)
    tiebreak_load(args)
    league_load(args)
    if args.tiebreak:
        from leaderboard import keys
        from leaderboard.selectors.boards import main_board_get

        wide = tiebreak_board(args)
        wide_key = keys.board(board_id=wide.id)
        report["bytes_per_player"] = {
            "main": bytes_per_player([keys.board(board_id=main_board_get(season_id=SEASON_ID).id)]),
            f"{args.tiebreak} tie-break columns": bytes_per_player(
                [wide_key, keys.board_index(board_key=wide_key)]
            ),
        }
    report["python"] = python_benchmarks(args, season)
    print()
    print(
        table(
            f"From Python, one connection ({args.players:,} players)",
            report["python"],
            ["n", "p50_ms", "p99_ms", "ops_s"],
        )
    )
    if not args.skip_http:
        report["http"] = http_benchmarks(args)
        print()
        print(
            table(
                f"HTTP via wrk -t{args.threads} -c{args.connections} -d{args.duration}s, "
                f"gunicorn {args.workers} sync workers",
                report["http"],
                ["rps", "p50_ms", "p99_ms", "non_2xx"],
            )
        )
    summary = [mode, *summarize(report)]
    if args.names:
        summary += summarize_names(report)
    if args.metadata:
        summary += summarize_against_main(report, suffix=WITH_METADATA, label="metadata")
    if args.tiebreak:
        summary += summarize_tiebreak(report)
    if args.cohort_size:
        summary += summarize_cohorts(report)
    print()
    print("\n".join(f"- {line}" for line in summary))
    report["summary"] = summary
    results_dir = ROOT / "bench" / "results"
    results_dir.mkdir(exist_ok=True)
    from django.conf import settings

    out = results_dir / f"read-{settings.LB_REDIS_MODE}-{args.players}-{int(time.time())}.json"
    out.write_text(json.dumps(report, indent=2))
    print(f"\nsaved {out}")
    if args.cleanup:
        cleanup(args)


if __name__ == "__main__":
    main()
