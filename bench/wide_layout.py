"""Redis's own cost of a tie-break board's layout against a plain board's, command by command.

Run on demand (never in the test suite)::

    .venv/bin/python bench/wide_layout.py [--players 1000000] [--batches 200] [--rounds 3]

A board with tie-break columns (docs/tie-break-columns.md) keeps every member at score 0 as
``key + player id`` with an index hash beside it, so every comparison in its skiplist is a
comparison of member bytes, and a changed player costs a ``ZREM``, a ``ZADD`` and an ``HSET``
where a plain board pays one ``ZADD GT``. This bench separates the two costs. Three boards of
``--players`` players each, filled alike (random points, two columns 0..49, random times):

- ``plain``: the baseline, a plain board (``ScoreCodec`` scores, the player id as member);
- ``wide``: the shipped layout, score 0, ``WideKeyCodec`` key + player id, the index;
- ``scored``: the same members and index, but each member's score is its key's leading 64 bits
  as a double (rounded, so never decreasing in the key: the order is unchanged, and members of
  equal scores still order by their bytes). Most comparisons then settle on the score.

Each round applies ``--batches`` batches of 500 results (random players, each a better value) to
each board in turn, in the order the round rotates: ``ZADD GT`` on the plain board; on the other
two, the old members off, the new ones on and the index set, one command of each per batch, in
one pipeline (the bench knows every player's key, as the apply script knows it from the index).
It reports Redis's own time per result, from the server's ``INFO commandstats`` (the
microseconds of each command, before and after: no client, network or Lua in it), the ratio of
each layout against the plain board of the same round, and the bytes per player of each board
(``MEMORY USAGE ... SAMPLES 0``).

Isolation: keys under a prefix of the run's own (``leaderboard/keys.py`` builders, board ids
1..3), unlinked at the end. Needs the single-node Redis (``make services``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from pathlib import Path
from random import Random

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaderboard_project.local_clusters")
os.environ["LEADERBOARD_KEY_PREFIX"] = f"bench-wide-{uuid.uuid4().hex[:8]}"
os.environ.setdefault("LOG_LEVEL", "WARNING")

from bench.database import bench_secret_key_default  # noqa: E402

bench_secret_key_default(bench="wide_layout")

import django  # noqa: E402

django.setup()

import redis  # noqa: E402

from leaderboard import keys  # noqa: E402
from leaderboard.codec import ScoreCodec, WideKeyCodec  # noqa: E402
from leaderboard.redis import get_board_redis  # noqa: E402

BATCH = 500
LAYOUTS = ("plain", "wide", "scored")
TIME_BITS = 23  # a 90-day season at one second
POINTS_MAX = 100_000
# Points up, kills down, deaths up: the demo's board ranked by points, kills, fewest deaths.
WIDE = WideKeyCodec(ascending=(False, False, True), time_bits=TIME_BITS)
PLAIN = ScoreCodec(points_bits=53 - TIME_BITS, time_bits=TIME_BITS)
COMMANDS = ("zadd", "zrem", "hset")


def prefix_score(key: str) -> float:
    """The key's leading 64 bits as a double: rounding never reverses two keys' order."""
    return float(int(key[:16], 16))


class Board:
    def __init__(self, layout: str, board_id: int) -> None:
        self.layout = layout
        self.key = keys.board(board_id=board_id)
        self.index = keys.board_index(board_key=self.key)
        # player -> the value it holds: (points, kills, deaths, ticks)
        self.values: dict[int, tuple[int, int, int, int]] = {}

    def wide_key(self, value: tuple[int, int, int, int]) -> str:
        points, kills, deaths, ticks = value
        return WIDE.encode(points=points, tiebreakers=(kills, deaths), elapsed_ticks=ticks)

    def write(
        self, pipe: redis.client.Pipeline, updates: dict[int, tuple[int, int, int, int]]
    ) -> None:
        if self.layout == "plain":
            scores = {
                str(p): PLAIN.encode(points=v[0], elapsed_ticks=v[3]) for p, v in updates.items()
            }
            pipe.zadd(self.key, scores, gt=True)
        else:
            old = [
                WIDE.member(key=self.wide_key(self.values[p]), player_id=p)
                for p in updates
                if p in self.values
            ]
            if old:
                pipe.zrem(self.key, *old)
            new_keys = {p: self.wide_key(v) for p, v in updates.items()}
            members = {
                WIDE.member(key=k, player_id=p): (0.0 if self.layout == "wide" else prefix_score(k))
                for p, k in new_keys.items()
            }
            pipe.zadd(self.key, members)
            pipe.hset(self.index, mapping={str(p): k for p, k in new_keys.items()})
        self.values.update(updates)


def command_usec(r: redis.Redis) -> dict[str, int]:
    stats = r.info("commandstats")
    return {c: int(stats.get(f"cmdstat_{c}", {}).get("usec", 0)) for c in COMMANDS}


def fill(r: redis.Redis, boards: list[Board], players: int, rng: Random) -> None:
    started = time.monotonic()
    for first in range(1, players + 1, BATCH):
        updates = {
            p: (
                rng.randint(0, POINTS_MAX),
                rng.randint(0, 49),
                rng.randint(0, 49),
                rng.randint(0, 1 << 20),
            )
            for p in range(first, min(first + BATCH, players + 1))
        }
        pipe = r.pipeline(transaction=False)
        for board in boards:
            board.write(pipe, updates)
        pipe.execute()
        done = min(first + BATCH - 1, players)
        if done % 100_000 < BATCH or done == players:
            print(f"  filled {done:,}/{players:,} ({time.monotonic() - started:.0f} s)", flush=True)


def better_batches(
    board: Board, batches: int, players: int, rng: Random
) -> list[dict[int, tuple[int, int, int, int]]]:
    """Each batch: distinct random players, each with more points and a later time."""
    out = []
    for _ in range(batches):
        chosen = rng.sample(range(1, players + 1), BATCH)
        out.append(
            {
                p: (
                    min(board.values[p][0] + rng.randint(1, 50), (1 << (53 - TIME_BITS)) - 1),
                    rng.randint(0, 49),
                    rng.randint(0, 49),
                    (1 << 20) + rng.randint(0, 1 << 20),
                )
                for p in chosen
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--players", type=int, default=1_000_000)
    parser.add_argument(
        "--batches", type=int, default=200, help="batches of 500 per board and round"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    r = get_board_redis()
    assert isinstance(r, redis.Redis), "bench/wide_layout.py needs the single-node Redis"
    boards = [Board(layout, n) for n, layout in enumerate(LAYOUTS, start=1)]
    rng = Random(args.seed)
    print(f"wide_layout: {args.players:,} players on each of {', '.join(LAYOUTS)}", flush=True)
    try:
        fill(r, boards, args.players, rng)
        for board in boards:
            used = sum(
                int(r.memory_usage(k, samples=0) or 0)
                for k in (board.key, board.index)
                if board.layout != "plain" or k == board.key
            )
            print(f"  {board.layout}: {used / args.players:.1f} bytes per player", flush=True)
        print(
            "round | order | plain us/result | wide us/result | scored us/result | "
            "wide/plain | scored/plain | scored/wide",
            flush=True,
        )
        for rnd in range(args.rounds):
            order = boards[rnd % 3 :] + boards[: rnd % 3]
            per_result: dict[str, float] = {}
            by_command: dict[str, dict[str, float]] = {}
            for board in order:
                batches = better_batches(board, args.batches, args.players, Random(args.seed + rnd))
                before = command_usec(r)
                for updates in batches:
                    pipe = r.pipeline(transaction=False)
                    board.write(pipe, updates)
                    pipe.execute()
                after = command_usec(r)
                results = args.batches * BATCH
                by_command[board.layout] = {c: (after[c] - before[c]) / results for c in COMMANDS}
                per_result[board.layout] = sum(by_command[board.layout].values())
            p, w, s = (per_result[name] for name in LAYOUTS)
            print(
                f"{rnd + 1} | {'-'.join(b.layout for b in order)} | {p:.2f} | {w:.2f} | {s:.2f} "
                f"| {w / p:.2f}x | {s / p:.2f}x | {s / w:.2f}x",
                flush=True,
            )
            for name in ("wide", "scored"):
                print(
                    f"    {name}: "
                    + ", ".join(f"{c.upper()} {by_command[name][c]:.2f}" for c in COMMANDS)
                    + " us/result",
                    flush=True,
                )
        # The scored layout must rank as the shipped one does, or its figures mean nothing.
        wide, scored = boards[1], boards[2]
        for start in (0, args.players // 2, args.players - 1000):
            if r.zrange(wide.key, start, start + 999) != r.zrange(scored.key, start, start + 999):
                raise SystemExit(f"the scored layout orders ranks {start}.. differently")
        print("  the scored layout ranks as the wide one (three slices of 1,000 compared)")
    finally:
        for board in boards:
            r.unlink(board.key, board.index)


if __name__ == "__main__":
    main()
