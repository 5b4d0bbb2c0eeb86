"""Tiered leagues (contract 0.3), the board side: which tier a player plays in on a league
board, and when its cohorts may form.

A league board is a board with cohorts of a schedule's season whose schedule has tiers
(``Board.tiers``, copied at the season's creation). A player's tier there is the ``next_tier``
of their latest movement on an earlier board of the same league (same schedule, same board
slug), decided by that season's close-out (closeout/services/leagues.py); a player without one
starts in the first tier, and one who skipped seasons keeps the tier their last season gave.

The timing is the hard part: a schedule's next season is created ahead and starts the moment
the previous one ends, so its first results arrive while the previous season is still closing,
before its close-out has decided anyone's tier; and a player's cohort (one tier) never changes
once assigned. So a league board whose previous league season is not closed yet *waits*
(``Board.league_waiting``): its results are stored and ranked on the board as usual, but nobody
joins a cohort. Once the previous season is closed (its movements committed with its final
standings), ``league_board_open`` assigns every player who has played meanwhile, in the order
of their first result, into the open cohort of their tier, and clears the flag in the same
transaction; ingestion then assigns newcomers at their first result, as on any board with
cohorts. docs/leagues.md says why this order of events is the only safe one.
"""

from __future__ import annotations

import logging

from django.db import connection, transaction

from seasons.models import Season

from ..models import Board, CohortMember, MatchResult, PlayerBan
from ..selectors.leagues import LeaguePlace, league_previous_open, league_tiers_get
from .cohorts import CohortCandidate, cohort_members_assign, cohorts_lock

logger = logging.getLogger(__name__)

_BOARDS = Board._meta.db_table
_SEASONS = Season._meta.db_table
_MEMBERS = CohortMember._meta.db_table
_RESULTS = MatchResult._meta.db_table
_BANS = PlayerBan._meta.db_table


# The board row, locked against every ingestion batch of the board (their FOR KEY SHARE).
_LOCK_SQL = f"""
    SELECT b.league_waiting, b.cohort_size, cardinality(b.tiers), b.slug, s.schedule_id,
           s.occurrence
    FROM {_BOARDS} b JOIN {_SEASONS} s ON s.id = b.season_id
    WHERE b.id = %s FOR UPDATE OF b
"""  # noqa: S608

_OPENED_SQL = f"UPDATE {_BOARDS} SET league_waiting = false WHERE id = %s"  # noqa: S608

# Who played while the board waited: every counted player without a cohort, by first result.
_WAITING_PLAYERS_SQL = f"""
    SELECT r.player_id FROM {_RESULTS} r
    WHERE r.board_id = %(board)s AND r.voided_at IS NULL
      AND NOT EXISTS (
          SELECT 1 FROM {_MEMBERS} m WHERE m.board_id = r.board_id AND m.player_id = r.player_id
      )
      AND NOT EXISTS (
          SELECT 1 FROM {_BANS} x WHERE x.season_id = r.season_id AND x.player_id = r.player_id
      )
    GROUP BY r.player_id
    ORDER BY min(r.achieved_at), r.player_id
"""  # noqa: S608


def league_board_open(*, board_id: int) -> int | None:
    """Form the cohorts of a waiting league board once the previous season of its league is
    closed: every player with a counted result and no cohort joins the open cohort of their
    tier, in the order of their first result, and the board stops waiting, in one transaction.

    How many players joined (0 for a board that was not waiting); None while the previous
    season is still open (nothing done)."""
    with transaction.atomic(), connection.cursor() as cursor:
        # FOR UPDATE conflicts with the FOR KEY SHARE every ingestion batch takes on its boards
        # (services/results.py): batches of this board in flight commit first, so their players
        # are seen below; the next ones wait for this commit and then read the flag cleared (a
        # row changed while a locker waited is read again), so they assign their newcomers
        # themselves. No player is left without a cohort between the two.
        cursor.execute(_LOCK_SQL, [board_id])
        row = cursor.fetchone()
        if row is None or not row[0]:
            return 0
        _, size, tiers, slug, schedule_id, occurrence = row
        if league_previous_open(
            cursor=cursor, schedule_id=schedule_id, occurrence=occurrence, slug=slug
        ):
            return None
        cohorts_lock(cursor=cursor, board_ids=[board_id])
        cursor.execute(_WAITING_PLAYERS_SQL, {"board": board_id})
        players = [int(player_id) for (player_id,) in cursor.fetchall()]
        place = LeaguePlace(board_id, slug, schedule_id, occurrence, tiers)
        tier_of = league_tiers_get(cursor=cursor, place=place, player_ids=players)
        if players:
            cohort_members_assign(
                cursor=cursor,
                candidates=[CohortCandidate(board_id, p, tier_of[p]) for p in players],
                sizes={board_id: size},
            )
        cursor.execute(_OPENED_SQL, [board_id])
    logger.info("league board %s: cohorts formed, %d players placed", board_id, len(players))
    return len(players)


def league_boards_open(*, season_id: int | None = None) -> list[int]:
    """Open every waiting league board (of one season, or all) whose previous league season is
    closed; the ids of the boards opened. The close-out calls it after it commits, the schedule
    after it creates seasons, and the close-out's sweep every minute (after a crash between)."""
    waiting = Board.objects.filter(league_waiting=True)
    if season_id is not None:
        waiting = waiting.filter(season_id=season_id)
    opened = []
    for board_id in waiting.order_by("id").values_list("id", flat=True):
        if league_board_open(board_id=board_id) is not None:
            opened.append(board_id)
    return opened
