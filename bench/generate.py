"""Match results generated in SQL for the PostgreSQL-heavy benchmarks (rebuild, close-out):
millions of rows without a Python object each. Imported once Django is set up."""

from __future__ import annotations

from django.db import connection
from tqdm import tqdm

from leaderboard.models import MatchResult
from leaderboard.selectors.boards import main_board_get
from seasons.models import Season


def results_generate(
    *,
    season: Season,
    players: int,
    results: int,
    spread_days: int,
    step: int = 1_000_000,
    board_id: int | None = None,
) -> None:
    """``results`` results on the season's main board (or board ``board_id``): every player
    gets a first one, the rest go to random players, at random times within the first
    ``spread_days`` of the season."""
    # Indexes are cheaper to build once than to maintain row by row.
    (index,) = MatchResult._meta.indexes
    with connection.cursor() as cur:
        cur.execute(f'DROP INDEX IF EXISTS "{index.name}"')
    sql = f"""
        INSERT INTO {MatchResult._meta.db_table}
               (match_id, player_id, season_id, board_id, points, achieved_at, ingested_at,
                void_reason)
        SELECT gen_random_uuid(),
               CASE WHEN g <= %(players)s THEN g
                    ELSE 1 + (hashint8(g) & 2147483647) %% %(players)s END,
               %(season)s, %(board)s, (random() * 50000)::int,
               %(start)s::timestamptz + random() * make_interval(days => %(days)s), now(), ''
        FROM generate_series(%(lo)s, %(hi)s) g
    """
    board = board_id if board_id is not None else main_board_get(season_id=season.id).id
    with tqdm(total=results, desc="generate results", unit=" rows", unit_scale=True) as bar:
        for lo in range(1, results + 1, step):
            hi = min(results, lo + step - 1)
            with connection.cursor() as cur:
                cur.execute(
                    sql,
                    {
                        "players": players,
                        "season": season.id,
                        "board": board,
                        "start": season.starts_at,
                        "days": spread_days,
                        "lo": lo,
                        "hi": hi,
                    },
                )
            bar.update(hi - lo + 1)
    with connection.schema_editor() as editor:
        editor.add_index(MatchResult, index)
    with connection.cursor() as cur:
        cur.execute(f"VACUUM ANALYZE {MatchResult._meta.db_table}")
