"""Tournaments (contract 0.3, docs/tournaments.md): joining a board that requires it, staff
removing participants, and the refusals ingestion records for results a tournament board does
not take.

A join is race-free at the limit because every join of a board runs under the board row's
lock (``SELECT ... FOR NO KEY UPDATE``): the seat count read under it is the count the insert
commits with, so 1,000 concurrent joins for 20 seats give exactly 20. The lock does not
conflict with the ``FOR KEY SHARE`` lock every ingested batch takes on its boards, so joins
never wait for ingestion, nor ingestion for joins.

Whether a result counts is decided by ``match_results_store`` (services/results.py), in the
transaction that would store it, with the SQL of this module: a refusal is recorded there,
once per (match, player, board), and only the Kafka record that carried it dead-letters it,
once (``refusals_mark_dead_lettered`` after the broker acknowledged the letter).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.utils import timezone

from seasons.models import SeasonStatus

from ..models import Board, MatchResult, Participant, RefusalCode, RefusedResult
from ..selectors._sql import array_literal

logger = logging.getLogger(__name__)

_BOARDS = Board._meta.db_table
_RESULTS = MatchResult._meta.db_table
_PARTICIPANTS = Participant._meta.db_table
_REFUSED = RefusedResult._meta.db_table

# pg_advisory_xact_lock(key1, key2): key1 names what is locked (the tournament decisions of a
# board); key2 is the board id. Taken by every batch bringing results for a tournament board,
# so two batches (a partition's two owners during a rebalance) never decide the same player's
# results side by side.
TOURNAMENT_LOCK_CLASS = 0x746F75  # "tou"

# Why a join is refused: the API's 409 codes.
BOARD_FULL = "board_full"
JOIN_NOT_REQUIRED = "join_not_required"
SEASON_ENDED = "season_ended"


class JoinRefused(Exception):
    """A join the board does not take; ``code`` is one of the API's 409 codes."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


@dataclass(frozen=True, slots=True)
class BoardJoined:
    player_id: int
    # False when the player had joined before (the call changed nothing).
    joined: bool
    joined_at: datetime
    # Players on the board after the call, and its limit (None: unlimited).
    participants: int
    max_size: int | None


def board_player_join(*, board_id: int, player_id: int, now: datetime | None = None) -> BoardJoined:
    """Join ``player_id`` to the board. Idempotent: joining twice answers ``joined=False``.

    Raises JoinRefused (``join_not_required``, ``season_ended``, ``board_full``) and
    Board.DoesNotExist for a board that is gone."""
    now = now or timezone.now()
    with transaction.atomic():
        board = (
            Board.objects.select_for_update(no_key=True, of=("self",))
            .select_related("season")
            .get(pk=board_id)
        )
        where = f"board {board.slug!r} of season {board.season_id}"
        if not board.join_required:
            raise JoinRefused(
                JOIN_NOT_REQUIRED, f"{where} does not require joining: every player's results count"
            )
        existing = Participant.objects.filter(board_id=board_id, player_id=player_id).first()
        if existing is not None:
            return BoardJoined(
                player_id, False, existing.joined_at, board.participants, board.max_size
            )
        season = board.season
        if season.status in (SeasonStatus.CLOSING, SeasonStatus.CLOSED) or now >= season.ends_at:
            raise JoinRefused(SEASON_ENDED, f"season {season.id} has ended: {where} takes no one")
        if board.max_size is not None and board.participants >= board.max_size:
            raise JoinRefused(
                BOARD_FULL, f"{where} is full: {board.participants} of {board.max_size} joined"
            )
        Participant.objects.create(board_id=board_id, player_id=player_id, joined_at=now)
        Board.objects.filter(pk=board_id).update(participants=board.participants + 1)
    return BoardJoined(player_id, True, now, board.participants + 1, board.max_size)


def board_players_remove(*, board_id: int, player_ids: Sequence[int]) -> int:
    """Staff remove participants (their seats free up; their stored results stay counted, their
    next ones are refused as ``not_joined``). Returns how many were removed."""
    with transaction.atomic():
        board = Board.objects.select_for_update(no_key=True).get(pk=board_id)
        removed, _ = Participant.objects.filter(
            board_id=board_id, player_id__in=list(player_ids)
        ).delete()
        if removed:
            Board.objects.filter(pk=board_id).update(participants=board.participants - removed)
    if removed:
        logger.info("board %s: %d participant(s) removed", board_id, removed)
    return removed


# --- ingestion's decisions (called by match_results_store, inside its transaction) -----------


class Refusal(NamedTuple):
    """A staged result of the batch a tournament board does not take."""

    code: str
    # True when this record must be dead-lettered: it is the record the refusal was decided
    # for and its letter has not been acknowledged yet. False: another record carried the same
    # result, or the letter went out before (a redelivery, a replay): a duplicate.
    dead_letter: bool
    board_id: int
    match_id: uuid.UUID
    player_id: int


# The staged results of tournament boards that are neither stored nor refused yet, each result
# once (the batch may carry one twice: its first record decides), judged in arrival order per
# player: not joined, or beyond the board's attempts counting the player's stored results
# (voided ones included: voiding a result does not give the attempt back) and the ones before
# it in the batch. Refusals only of players who joined never consume an attempt.
_JUDGE_SQL = f"""
    WITH fresh AS (
        SELECT DISTINCT ON (s.board_id, s.player_id, s.match_id)
               s.board_id, s.player_id, s.match_id, s.kafka_partition, s.kafka_offset
        FROM {{stage}} s
        WHERE s.board_id = ANY(%s)
          AND NOT EXISTS (
              SELECT 1 FROM {_RESULTS} r
              WHERE r.match_id = s.match_id AND r.player_id = s.player_id
                AND r.board_id = s.board_id
          )
          AND NOT EXISTS (
              SELECT 1 FROM {_REFUSED} f
              WHERE f.match_id = s.match_id AND f.player_id = s.player_id
                AND f.board_id = s.board_id
          )
        ORDER BY s.board_id, s.player_id, s.match_id, s.kafka_partition, s.kafka_offset
    ), numbered AS (
        SELECT f.*, row_number() OVER (
            PARTITION BY f.board_id, f.player_id ORDER BY f.kafka_partition, f.kafka_offset
        ) AS n
        FROM fresh f
    ), judged AS (
        SELECT n.*, CASE
            WHEN b.join_required AND NOT EXISTS (
                SELECT 1 FROM {_PARTICIPANTS} p
                WHERE p.board_id = n.board_id AND p.player_id = n.player_id
            ) THEN '{RefusalCode.NOT_JOINED.value}'
            WHEN b.max_attempts IS NOT NULL AND n.n + (
                SELECT count(*) FROM {_RESULTS} r
                WHERE r.board_id = n.board_id AND r.player_id = n.player_id
            ) > b.max_attempts THEN '{RefusalCode.ATTEMPTS_EXHAUSTED.value}'
        END AS code
        FROM numbered n JOIN {_BOARDS} b ON b.id = n.board_id
    )
    INSERT INTO {_REFUSED} (board_id, match_id, player_id, code, kafka_partition, kafka_offset,
                            refused_at)
    SELECT board_id, match_id, player_id, code, kafka_partition, kafka_offset, now()
    FROM judged WHERE code IS NOT NULL
    ON CONFLICT (match_id, player_id, board_id) DO NOTHING
"""  # noqa: S608 -- table names come from the models; values are parameters
# Every staged row whose result is refused (now or before) leaves the stage, so the INSERT of
# the batch never stores it; each says whether its record must be dead-lettered.
_TAKE_SQL = f"""
    DELETE FROM {{stage}} s USING {_REFUSED} f
    WHERE s.board_id = ANY(%s)
      AND f.match_id = s.match_id AND f.player_id = s.player_id AND f.board_id = s.board_id
    RETURNING s.kafka_partition, s.kafka_offset, f.code,
              f.kafka_partition = s.kafka_partition AND f.kafka_offset = s.kafka_offset
                  AND f.dead_lettered_at IS NULL,
              f.board_id, f.match_id, f.player_id
"""  # noqa: S608


def tournament_results_refuse(
    *, cursor: CursorWrapper, stage: str, board_ids: Sequence[int]
) -> dict[tuple[int, int], Refusal]:
    """Decide the staged results of the tournament boards ``board_ids`` (those that require
    joining or limit attempts): record the refusals, take every refused row out of the stage
    table ``stage``, and return them by (kafka_partition, kafka_offset).

    The caller is match_results_store, inside its transaction, holding the batch's boards; the
    boards' tournament locks are taken here, in board order, and held to its commit."""
    boards = sorted(set(board_ids))
    for board_id in boards:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [TOURNAMENT_LOCK_CLASS, board_id])
    cursor.execute(_JUDGE_SQL.format(stage=stage), [boards])
    cursor.execute(_TAKE_SQL.format(stage=stage), [boards])
    return {
        (partition, offset): Refusal(code, bool(letter), board_id, match_id, player_id)
        for partition, offset, code, letter, board_id, match_id, player_id in cursor.fetchall()
    }


_MARK_SQL = f"""
    UPDATE {_REFUSED} f SET dead_lettered_at = now()
    FROM unnest(%s::text::bigint[], %s::text::uuid[], %s::text::bigint[])
         AS m(board_id, match_id, player_id)
    WHERE f.board_id = m.board_id AND f.match_id = m.match_id AND f.player_id = m.player_id
      AND f.dead_lettered_at IS NULL
"""  # noqa: S608


def refusals_mark_dead_lettered(*, refusals: Sequence[Refusal]) -> int:
    """Record that the refusals' dead letters were acknowledged by the broker: a redelivery or
    a replay of their records is then a duplicate, never a second letter. Idempotent."""
    if not refusals:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            _MARK_SQL,
            [
                array_literal([r.board_id for r in refusals]),
                "{" + ",".join(str(r.match_id) for r in refusals) + "}",
                array_literal([r.player_id for r in refusals]),
            ],
        )
        return cursor.rowcount
