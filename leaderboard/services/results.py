"""Storing ingested match results: one batch in one statement, each row's origin reported.

Ingestion (the Kafka consumer's batch handler) hands over the valid results of a batch; this
module writes them to the leaderboard app's table and says, per result, which message's row is
stored, so the caller can decide what counts (docs/ingestion.md, "Exactly once").
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from django.db import connection, transaction

from leaderboard.models import Board, MatchResult, PlayerBan
from seasons.models import Season


class ResultRow(NamedTuple):
    """One result to store, in the order of the staging table's columns."""

    match_id: uuid.UUID
    player_id: int
    season_id: int
    board_id: int
    points: int
    achieved_at: datetime
    kafka_partition: int
    kafka_offset: int


class RowStored(NamedTuple):
    """What the table holds for one result of the batch after the insert."""

    xid: int | None  # the inserting transaction (None: legacy rows stored without it)
    # True when the stored row came from this very message (same partition and offset): it
    # was inserted now, or earlier and then the process died before it reached the boards.
    from_this_message: bool
    # Voided, or the player is banned from the season: stored, but not counted.
    excluded: bool


_TABLE = MatchResult._meta.db_table
_BANS = PlayerBan._meta.db_table
_SEASONS = Season._meta.db_table
_BOARDS = Board._meta.db_table

# The season and board foreign keys are not checked per row (ingestion migration 0006,
# leaderboard migration 0005): this lock, taken once per batch and held to the commit, is the
# one those checks took. A season or board being deleted waits for the batch, and then its
# trigger sees the batch's rows and refuses. Ordered, so two consumers lock in the same order.
LOCK_BOARDS_SQL = f"""
    SELECT b.id FROM {_BOARDS} b JOIN {_SEASONS} s ON s.id = b.season_id
    WHERE b.id = ANY(%s) ORDER BY b.id FOR KEY SHARE OF b, s
"""  # noqa: S608

# The batch goes in by COPY into a per-connection temp table, then one INSERT ... SELECT with
# conflicts ignored: measured about twice as fast as one INSERT over unnest(<arrays>), whose
# per-element array adaptation dominates (docs/ingestion.md). pg_current_xact_id records the
# transaction for rebuilds running meanwhile.
_STAGE = "ingest_match_result_stage"
_STAGE_SQL = f"""
    CREATE TEMP TABLE IF NOT EXISTS {_STAGE} (
        match_id uuid, player_id bigint, season_id integer, board_id bigint, points bigint,
        achieved_at timestamptz, kafka_partition integer, kafka_offset bigint
    ) ON COMMIT DELETE ROWS
"""
_COPY_SQL = f"COPY {_STAGE} FROM STDIN"
_INSERT_SQL = f"""
    INSERT INTO {_TABLE} (match_id, player_id, season_id, board_id, points, achieved_at,
                          ingested_at, void_reason, kafka_partition, kafka_offset, ingest_xid)
    SELECT s.match_id, s.player_id, s.season_id, s.board_id, s.points, s.achieved_at, now(), '',
           s.kafka_partition, s.kafka_offset, pg_current_xact_id()::text::bigint
    FROM {_STAGE} s
    ON CONFLICT (match_id, player_id, board_id) DO NOTHING
    RETURNING kafka_partition, kafka_offset, ingest_xid, EXISTS (
        SELECT 1 FROM {_BANS} b
        WHERE b.season_id = {_TABLE}.season_id AND b.player_id = {_TABLE}.player_id
    )
"""  # noqa: S608 -- table names are constants, every value comes in by COPY

_EXISTING_SQL = f"""
    SELECT r.match_id, r.player_id, r.board_id, r.kafka_partition, r.kafka_offset, r.ingest_xid,
           r.voided_at IS NOT NULL OR EXISTS (
               SELECT 1 FROM {_BANS} b
               WHERE b.season_id = r.season_id AND b.player_id = r.player_id
           )
    FROM {_TABLE} r
    JOIN unnest(%s::uuid[], %s::bigint[], %s::bigint[]) AS t(match_id, player_id, board_id)
      ON r.match_id = t.match_id AND r.player_id = t.player_id AND r.board_id = t.board_id
"""  # noqa: S608


# kafka_partition, kafka_offset, ingest_xid, excluded (voided or banned) of a stored row.
_StoredRow = tuple[int | None, int | None, int | None, bool]


class BoardsDeleted(Exception):
    """Boards (or seasons) of the batch were deleted after it was validated; nothing stored."""

    def __init__(self, board_ids: set[int]) -> None:
        super().__init__(f"board(s) {sorted(board_ids)} deleted while storing their results")
        self.board_ids = board_ids


def match_results_store(*, rows: Sequence[ResultRow]) -> list[RowStored]:
    """Insert the batch (conflicts on (match_id, player_id, board) ignored) and say, for each
    row in order, what the table holds for it.

    Raises BoardsDeleted, storing nothing, if a board of the batch no longer exists.
    """
    if not rows:
        return []
    with transaction.atomic(), connection.cursor() as cursor:
        board_ids = {r.board_id for r in rows}
        cursor.execute(LOCK_BOARDS_SQL, [sorted(board_ids)])
        gone = board_ids - {row[0] for row in cursor.fetchall()}
        if gone:
            raise BoardsDeleted(gone)
        cursor.execute(_STAGE_SQL)
        with cursor.cursor.copy(_COPY_SQL) as copy:
            for r in rows:
                copy.write_row(r)
        cursor.execute(_INSERT_SQL)
        # Inserted now, keyed by the message that won the row (a Kafka record is one result,
        # so its partition and offset name it; cheaper to match on than the uuid pair).
        inserted: dict[tuple[int, int], tuple[int | None, bool]] = {
            (row[0], row[1]): (row[2], bool(row[3])) for row in cursor.fetchall()
        }
        # The rest conflicted: stored before, or by another message of this batch carrying the
        # same result. The stored row says which message it came from.
        missing = {
            (r.match_id, r.player_id, r.board_id)
            for r in rows
            if (r.kafka_partition, r.kafka_offset) not in inserted
        }
        existing: dict[tuple[uuid.UUID, int, int], _StoredRow] = {}
        if missing:
            cursor.execute(
                _EXISTING_SQL,
                [list(column) for column in zip(*missing, strict=True)],
            )
            existing = {
                (row[0], row[1], row[2]): (row[3], row[4], row[5], row[6]) for row in cursor
            }
    stored: list[RowStored] = []
    for r in rows:
        new = inserted.get((r.kafka_partition, r.kafka_offset))
        if new is not None:
            xid, banned = new
            stored.append(RowStored(xid, True, banned))
            continue
        # Absent only if deleted in between; treat it as not ours to count.
        partition, offset, xid, excluded = existing.get(
            (r.match_id, r.player_id, r.board_id), (None, None, None, True)
        )
        same_message = (partition, offset) == (r.kafka_partition, r.kafka_offset)
        stored.append(RowStored(xid, same_message, excluded))
    return stored
