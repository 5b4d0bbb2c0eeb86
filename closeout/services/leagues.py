"""Tiered leagues at the close-out (contract 0.3, docs/leagues.md): who moves up, who moves
down, and the rewards a league board pays by rank within each cohort.

Both run inside the close-out's transaction (``close_out._season_finalize``), from PostgreSQL,
the same results the final standings come from, so a season's standings, grants, movements and
status commit together: the next season of the league (leaderboard/services/leagues.py) forms
its cohorts from movements that can no longer change.

The rule, per cohort, over its members with a score at the close (``n`` of them):

- ``promote`` = floor(n x promote% / 100) players move up one tier, ``relegate`` = floor(n x
  relegate% / 100) move down one; never past the ends (the top tier's best and the bottom
  tier's worst stay). Floor: a cohort never sends more than its share either way, and a cohort
  too small for one player's share moves nobody.
- Ties (an identical key on the board, reached at the same tick) never hurt a player: at the
  promotion boundary every player tied with the last one promoted is promoted too (the cohort
  may send more than its share up); at the relegation boundary a tied group is relegated only
  if all of it is within the bottom share (it may send fewer down).
- Everyone else stays; a player with no score on the board (did not play, or every result
  voided) has no movement and keeps their tier.
"""

from __future__ import annotations

from django.db import connection
from django.utils import timezone

from leaderboard.models import LeagueMovement
from leaderboard.selectors.boards import BoardRef
from leaderboard.selectors.scores import board_cohort_ranks_sql
from seasons.leagues import Movement

from ..models import GrantStatus, RewardGrant, RewardTier

_MOVEMENTS = LeagueMovement._meta.db_table


def board_movements_decide(*, board: BoardRef) -> int:
    """Write every cohort member's movement on the league board (replacing any), in the
    caller's transaction; how many players have one."""
    ranks, params = board_cohort_ranks_sql(board=board)
    sql = f"""
        INSERT INTO {_MOVEMENTS} (board_id, player_id, tier, cohort_rank, movement, next_tier)
        SELECT %(board_id)s, r.player_id, r.tier, r.cohort_rank, d.movement,
               r.tier + CASE d.movement WHEN %(promoted)s THEN 1 WHEN %(relegated)s THEN -1
                                        ELSE 0 END
        FROM ({ranks}) r
        CROSS JOIN LATERAL (
            SELECT CASE
                WHEN r.tier < %(top)s
                     AND r.shared_rank <= r.players * %(promote)s / 100 THEN %(promoted)s
                WHEN r.tier > 0
                     AND r.shared_rank > r.players - r.players * %(relegate)s / 100
                     THEN %(relegated)s
                ELSE %(stayed)s
            END AS movement
        ) d
        ORDER BY r.player_id
    """  # noqa: S608 -- table names come from the models, every value is a parameter
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {_MOVEMENTS} WHERE board_id = %s", [board.id])  # noqa: S608
        cursor.execute(
            sql,
            params
            | {
                "top": len(board.tiers) - 1,
                "promote": board.promote_percent,
                "relegate": board.relegate_percent,
                "promoted": Movement.PROMOTED,
                "relegated": Movement.RELEGATED,
                "stayed": Movement.STAYED,
            },
        )
        return max(cursor.rowcount, 0)


def league_grants_create(*, board: BoardRef) -> int:
    """The league board's grants, by rank within each cohort (``LeagueMovement.cohort_rank``,
    written just before): a reward tier naming the player's league tier first, else one naming
    none. A player granted already keeps their grant. In the caller's transaction; how many
    grants were created."""
    now = timezone.now()
    sql = f"""
        INSERT INTO {RewardGrant._meta.db_table}
            (season_id, board_id, tier_id, player_id, rank, reward_name, quantity, status,
             created_at, updated_at)
        SELECT %(season)s, %(board)s, t.id, m.player_id, m.cohort_rank, t.reward_name,
               t.quantity, %(pending)s, %(now)s, %(now)s
        FROM {_MOVEMENTS} m
        CROSS JOIN LATERAL (
            SELECT t.id, t.reward_name, t.quantity FROM {RewardTier._meta.db_table} t
            WHERE t.board_id = %(board)s
              AND m.cohort_rank BETWEEN t.rank_from AND t.rank_to
              AND t.league_tier IN ('', (%(tiers)s::text[])[m.tier + 1])
            ORDER BY t.league_tier = '', t.rank_from
            LIMIT 1
        ) t
        WHERE m.board_id = %(board)s
        ORDER BY m.player_id
        ON CONFLICT (board_id, player_id) DO NOTHING
    """  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            {
                "season": board.season_id,
                "board": board.id,
                "pending": GrantStatus.PENDING,
                "now": now,
                "tiers": list(board.tiers),
            },
        )
        return max(cursor.rowcount, 0)
