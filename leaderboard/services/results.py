"""Storing ingested match results: one batch in one statement, each row's origin reported.

Ingestion (the Kafka consumer's batch handler) hands over the valid results of a batch; this
module writes them to the leaderboard app's table and says, per result, which message's row is
stored, so the caller can decide what counts (docs/ingestion.md, "Exactly once").
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper

from leaderboard.models import Board, CohortMember, MatchResult, PlayerBan, RefusedResult
from seasons.models import Season, SeasonStatus

from ..selectors._sql import array_literal
from ..selectors.leagues import LeaguePlace, league_tiers_get
from .cohorts import KNOWN_MEMBERS, CohortCandidate, cohort_members_assign, cohorts_lock
from .tournaments import Refusal, tournament_results_refuse


class ResultRow(NamedTuple):
    """One result to store, as a row (tests and benchmarks build them by hand)."""

    match_id: uuid.UUID
    player_id: int
    season_id: int
    board_id: int
    points: int
    achieved_at: datetime
    kafka_partition: int
    kafka_offset: int
    # Compact UTF-8 JSON (ingestion/schema.py), for a board that keeps metadata; else None.
    metadata: bytes | None = None
    # The board's tie-break column values in its column order; None on a plain board.
    tiebreakers: list[int] | None = None


@dataclass(frozen=True, slots=True)
class ResultColumns:
    """Results to store, column by column (index i of every list is one result), in the order
    of the staging table's columns: what ingestion hands over, with no object per result."""

    match_ids: list[uuid.UUID]
    player_ids: list[int]
    season_ids: list[int]
    board_ids: list[int]
    points: list[int]
    achieved_at: list[datetime]
    kafka_partitions: list[int]
    kafka_offsets: list[int]
    # None where the result has none or its board keeps none (Board.keeps_metadata).
    metadata: list[bytes | None]
    # The values of each result's tie-break columns in its board's order; None on plain boards.
    tiebreakers: list[list[int] | None]

    @classmethod
    def of(cls, rows: Iterable[ResultRow]) -> ResultColumns:
        rows = list(rows)
        return cls(*([list(column) for column in zip(*rows, strict=True)] or [[]] * 10))

    def __len__(self) -> int:
        return len(self.kafka_offsets)

    def rows(
        self,
    ) -> Iterator[
        tuple[uuid.UUID, int, int, int, int, datetime, int, int, bytes | None, str | None]
    ]:
        """The staging table's rows; tie-break values as an array literal (``{12,3}``): COPY
        writes text about three times faster than an int4[] built from a list."""
        tiebreakers: list[str | None] | list[list[int] | None] = self.tiebreakers
        if self.tiebreakers.count(None) != len(self.tiebreakers):
            tiebreakers = [
                None if t is None else "{" + ",".join(map(str, t)) + "}" for t in self.tiebreakers
            ]
        return zip(
            self.match_ids,
            self.player_ids,
            self.season_ids,
            self.board_ids,
            self.points,
            self.achieved_at,
            self.kafka_partitions,
            self.kafka_offsets,
            self.metadata,
            tiebreakers,
            strict=True,
        )


class RowStored(NamedTuple):
    """What the table holds for one result of the batch after the insert."""

    xid: int | None  # the inserting transaction (None: legacy rows stored without it)
    # True when the stored row came from this very message (same partition and offset): it
    # was inserted now, or earlier and then the process died before it reached the boards.
    from_this_message: bool
    # Voided, or the player is banned from the season: stored, but not counted.
    excluded: bool


@dataclass(frozen=True, slots=True)
class StoredBatch:
    """What the table holds for a batch after the insert, without an object per result: the
    rows it inserted are the rule, the others (and the banned) the exceptions.

    Rows are named by the Kafka record that carried them, (kafka_partition, kafka_offset).
    """

    xid: int  # the transaction that inserted the batch's new rows
    # Rows this insert did not create (stored before, or by another row of the batch carrying
    # the same result): what the table holds for each.
    others: dict[tuple[int, int], RowStored]
    # Rows inserted now whose player is banned from the season.
    banned: frozenset[tuple[int, int]]
    # Rows a tournament board refused (services/tournaments.py): not stored, never counted;
    # each says whether its record is dead-lettered now or is a duplicate.
    refused: dict[tuple[int, int], Refusal] = field(default_factory=dict)

    def row(self, *, partition: int, offset: int) -> RowStored:
        """What the table holds for the row of (partition, offset)."""
        key = (partition, offset)
        other = self.others.get(key)
        if other is not None:
            return other
        return RowStored(self.xid, True, key in self.banned)


_TABLE = MatchResult._meta.db_table
_BANS = PlayerBan._meta.db_table
_SEASONS = Season._meta.db_table
_BOARDS = Board._meta.db_table
_COHORT_MEMBERS = CohortMember._meta.db_table

# The season and board foreign keys are not checked per row (ingestion migration 0006,
# leaderboard migration 0005): this lock, taken once per batch and held to the commit, is the
# one those checks took. A season or board being deleted waits for the batch, and then its
# trigger sees the batch's rows and refuses. Ordered, so two consumers lock in the same order.
# The last column: whether the board judges its results as a tournament. A board that ever
# refused one still does with both options cleared since: a refused result stays refused
# (redelivered, replayed), so the judging must still take it out of the batch.
# The status last: a season closed since the batch's checks read it (the close-out's
# finalizing holds the season FOR UPDATE, so this lock waits for its commit and reads the
# closed row) takes none of the batch's results.
LOCK_BOARDS_SQL = f"""
    SELECT b.id, b.cohort_size, b.league_waiting, cardinality(b.tiers), b.slug, s.schedule_id,
           s.occurrence, b.cohort_members,
           b.join_required OR b.max_attempts IS NOT NULL
               OR EXISTS (SELECT 1 FROM {RefusedResult._meta.db_table} f WHERE f.board_id = b.id),
           s.status = %s
    FROM {_BOARDS} b JOIN {_SEASONS} s ON s.id = b.season_id
    WHERE b.id = ANY(%s) ORDER BY b.id FOR KEY SHARE OF b, s
"""  # noqa: S608

# The batch goes in by binary COPY into a per-connection temp table, then one INSERT ... SELECT
# with conflicts ignored: measured about twice as fast as one INSERT over unnest(<arrays>),
# whose per-element array adaptation dominates (docs/ingestion.md); binary rather than text
# COPY because formatting each value as text was most of the client's cost of this step.
# pg_current_xact_id records the transaction for rebuilds running meanwhile.
_STAGE = "ingest_match_result_stage"
_STAGE_COLUMNS = (
    ("match_id", "uuid"),
    ("player_id", "int8"),
    ("season_id", "int4"),
    ("board_id", "int8"),
    ("points", "int8"),
    ("achieved_at", "timestamptz"),
    ("kafka_partition", "int4"),
    ("kafka_offset", "int8"),
    # bytea: the compact JSON goes in as it is, and the INSERT turns it into jsonb.
    ("metadata", "bytea"),
    # text: an array literal, cast in the INSERT (ResultColumns.rows).
    ("tiebreakers", "text"),
)
_STAGE_SQL = f"""
    CREATE TEMP TABLE IF NOT EXISTS {_STAGE} (
        {", ".join(f"{name} {kind}" for name, kind in _STAGE_COLUMNS)}
    ) ON COMMIT DELETE ROWS
"""
_COPY_SQL = f"COPY {_STAGE} FROM STDIN (FORMAT BINARY)"
# What a result of a season closed under the batch becomes: the dead-letter code the checks
# give a closed season's results (ingestion/schema.py SEASON_CLOSED).
SEASON_CLOSED_CODE = "season_closed"
_TAKE_CLOSED_SQL = f"""
    DELETE FROM {_STAGE} WHERE board_id = ANY(%s)
    RETURNING kafka_partition, kafka_offset, board_id, match_id, player_id
"""  # noqa: S608
_COPY_TYPES = [kind for _, kind in _STAGE_COLUMNS]
# One row back, not one per result: the transaction, how many rows were inserted and which of
# them are a banned player's (rare). Which rows conflicted is asked only when some did.
_INSERT_SQL = f"""
    WITH inserted AS (
        INSERT INTO {_TABLE} (match_id, player_id, season_id, board_id, points, achieved_at,
                              ingested_at, void_reason, kafka_partition, kafka_offset,
                              ingest_xid, metadata, tiebreakers)
        SELECT s.match_id, s.player_id, s.season_id, s.board_id, s.points, s.achieved_at, now(),
               '', s.kafka_partition, s.kafka_offset, pg_current_xact_id()::text::bigint,
               convert_from(s.metadata, 'UTF8')::jsonb, s.tiebreakers::int4[]
        FROM {_STAGE} s
        ON CONFLICT (match_id, player_id, board_id) DO NOTHING
        RETURNING kafka_partition, kafka_offset, season_id, player_id
    ), banned AS (
        SELECT i.kafka_partition, i.kafka_offset FROM inserted i
        WHERE EXISTS (
            SELECT 1 FROM {_BANS} b WHERE b.season_id = i.season_id AND b.player_id = i.player_id
        )
    )
    SELECT pg_current_xact_id()::text::bigint, (SELECT count(*) FROM inserted),
           ARRAY(SELECT kafka_partition FROM banned ORDER BY kafka_partition, kafka_offset),
           ARRAY(SELECT kafka_offset FROM banned ORDER BY kafka_partition, kafka_offset)
"""  # noqa: S608 -- table names come from the models, every value comes in by COPY
# The staged rows this transaction did not insert, and what the table holds for each (a later
# statement: its snapshot sees rows other transactions committed while the insert waited on
# them). LIMIT 1 keeps each lookup a probe of the unique index, whatever the planner thinks of
# the temp table's size. No stored row (deleted meanwhile): reported as not this message's.
_OTHERS_SQL = f"""
    SELECT s.kafka_partition, s.kafka_offset, r.kafka_partition, r.kafka_offset, r.ingest_xid,
           r.excluded
    FROM {_STAGE} s
    LEFT JOIN LATERAL (
        SELECT r.kafka_partition, r.kafka_offset, r.ingest_xid,
               r.voided_at IS NOT NULL OR EXISTS (
                   SELECT 1 FROM {_BANS} b
                   WHERE b.season_id = r.season_id AND b.player_id = r.player_id
               ) AS excluded
        FROM {_TABLE} r
        WHERE r.match_id = s.match_id AND r.player_id = s.player_id AND r.board_id = s.board_id
        LIMIT 1
    ) r ON true
    WHERE r.ingest_xid IS DISTINCT FROM %s
       OR r.kafka_partition IS DISTINCT FROM s.kafka_partition
       OR r.kafka_offset IS DISTINCT FROM s.kafka_offset
"""  # noqa: S608


# Whether each player of the batch on its boards with cohorts has a cohort, each pair once, in
# the order of their first result (services/cohorts.py); a banned player's results do not count,
# so they are left out. Asked when this process knows few of the batch's players (a season's
# first hours, a consumer just started): each staged row probes the memberships' index once.
_COHORT_STAGE_ASK_SQL = f"""
    SELECT s.board_id, s.player_id, EXISTS (
        SELECT 1 FROM {_COHORT_MEMBERS} m
        WHERE m.board_id = s.board_id AND m.player_id = s.player_id
    )
    FROM {_STAGE} s
    WHERE s.board_id = ANY(%s)
      AND NOT EXISTS (
          SELECT 1 FROM {_BANS} b WHERE b.season_id = s.season_id AND b.player_id = s.player_id
      )
    GROUP BY s.board_id, s.player_id
    ORDER BY s.board_id, min(s.achieved_at), s.player_id
"""  # noqa: S608
# The same for named players in the order given: the few of the batch this process does not
# know to be in a cohort (the usual batch past a season's first days), and, under the boards'
# locks, the newcomers found before them when another batch may have assigned some meanwhile.
_COHORT_ASK_SQL = f"""
    SELECT f.board_id, f.player_id, EXISTS (
        SELECT 1 FROM {_COHORT_MEMBERS} m
        WHERE m.board_id = f.board_id AND m.player_id = f.player_id
    )
    FROM unnest(%s::text::bigint[], %s::text::bigint[])
         WITH ORDINALITY AS f(board_id, player_id, position)
    WHERE NOT EXISTS (
        SELECT 1 FROM {_BANS} x JOIN {_BOARDS} b ON b.season_id = x.season_id
        WHERE b.id = f.board_id AND x.player_id = f.player_id
    )
    ORDER BY f.position
"""  # noqa: S608


_COHORT_MEMBERS_SQL = f"SELECT id, cohort_members FROM {_BOARDS} WHERE id = ANY(%s)"  # noqa: S608


class BoardsDeleted(Exception):
    """Boards (or seasons) of the batch were deleted after it was validated; nothing stored."""

    def __init__(self, board_ids: set[int]) -> None:
        super().__init__(f"board(s) {sorted(board_ids)} deleted while storing their results")
        self.board_ids = board_ids


def match_results_store(*, results: ResultColumns) -> StoredBatch:
    """Insert the batch (conflicts on (match_id, player_id, board) ignored) and say what the
    table holds for its rows, each named by its (kafka_partition, kafka_offset).

    Raises BoardsDeleted, storing nothing, if a board of the batch no longer exists.
    """
    if not len(results):
        return StoredBatch(0, {}, frozenset())
    with transaction.atomic(), connection.cursor() as cursor:
        board_ids = set(results.board_ids)
        cursor.execute(LOCK_BOARDS_SQL, [SeasonStatus.CLOSED, sorted(board_ids)])
        locked = cursor.fetchall()
        gone = board_ids - {row[0] for row in locked}
        if gone:
            raise BoardsDeleted(gone)
        cursor.execute(_STAGE_SQL)
        with cursor.cursor.copy(_COPY_SQL) as copy:
            copy.set_types(_COPY_TYPES)
            write_row = copy.write_row
            for row in results.rows():
                write_row(row)
        # Tournament boards (docs/tournaments.md) decide here, in the transaction, which of
        # their results they take: the refused leave the stage before the INSERT. Read from the
        # locked rows, so a batch without such a board pays nothing more.
        closed = [row[0] for row in locked if row[9]]
        refused: dict[tuple[int, int], Refusal] = {}
        if closed:
            cursor.execute(_TAKE_CLOSED_SQL, [closed])
            refused = {
                (partition, offset): Refusal(SEASON_CLOSED_CODE, True, board_id, match_id, player)
                for partition, offset, board_id, match_id, player in cursor.fetchall()
            }
        tournaments = [row[0] for row in locked if row[8] and not row[9]]
        if tournaments:
            refused |= tournament_results_refuse(cursor=cursor, stage=_STAGE, board_ids=tournaments)
        cursor.execute(_INSERT_SQL)
        summary = cursor.fetchone()
        assert summary is not None
        xid, inserted, banned_partitions, banned_offsets = summary
        banned = frozenset(zip(banned_partitions, banned_offsets, strict=True))
        others: dict[tuple[int, int], RowStored] = {}
        if inserted < len(results) - len(refused):
            # Some rows conflicted: stored before, or by another row of this batch carrying the
            # same result. The stored row says which message it came from.
            cursor.execute(_OTHERS_SQL, [xid])
            for partition, offset, stored_partition, stored_offset, stored_xid, excluded in cursor:
                if stored_partition is None:
                    others[(partition, offset)] = RowStored(None, False, True)
                    continue
                same_message = (stored_partition, stored_offset) == (partition, offset)
                others[(partition, offset)] = RowStored(stored_xid, same_message, bool(excluded))
        # A league board waiting for its previous season's close-out takes no one into a
        # cohort yet (services/leagues.py); the lock above holds the flag read here until the
        # commit, against the close-out that clears it.
        cohort_sizes = {row[0]: row[1] for row in locked if row[1] and not row[2]}
        if cohort_sizes:
            leagues = {
                row[0]: LeaguePlace(row[0], row[4], row[5], row[6], row[3])
                for row in locked
                if row[0] in cohort_sizes and row[3]
            }
            members = {row[0]: row[7] for row in locked if row[0] in cohort_sizes}
            _cohorts_assign(cursor, results, refused, cohort_sizes, leagues, members)
    return StoredBatch(int(xid), others, banned, refused)


def _cohorts_assign(
    cursor: CursorWrapper,
    results: ResultColumns,
    refused: Mapping[tuple[int, int], Refusal],
    sizes: dict[int, int],
    leagues: dict[int, LeaguePlace],
    members: dict[int, int],
) -> None:
    """Assign the batch's players new to its boards with cohorts (services/cohorts.py), each
    into their tier on a league board. Players this process saw in a cohort are not asked
    about (KNOWN_MEMBERS: past a season's first days, most of a batch); the others are asked
    once without a lock (the usual batch brings few new); then, under the boards' locks, those
    found new are asked again only if another batch assigned players meanwhile: ``members``,
    each board's ``cohort_members`` as the batch read it before looking, still holds if nobody
    did."""
    pairs = {
        pair for pair in zip(results.board_ids, results.player_ids, strict=True) if pair[0] in sizes
    }
    unknown = KNOWN_MEMBERS.unknown(pairs)
    if not unknown:
        return
    if 2 * len(unknown) > len(pairs):
        # Mostly unknown: PostgreSQL looks at the staged rows itself (no arrays to send), and
        # says of each player whether they have a cohort, so that the next batches know.
        cursor.execute(_COHORT_STAGE_ASK_SQL, [sorted(sizes)])
    else:
        cursor.execute(_COHORT_ASK_SQL, _unknown_in_order(results, refused, set(unknown)))
    found: list[tuple[int, int]] = []
    known: list[tuple[int, int]] = []
    for board_id, player_id, is_member in cursor.fetchall():
        (known if is_member else found).append((board_id, player_id))
    if not found:
        _members_known_on_commit(known)
        return
    # Their tiers before the locks (an open league board's tiers no longer change): the locks
    # are held to the commit, and every other assigner of the board waits for them.
    tiers: dict[int, dict[int, int]] = {}
    for board_id, place in leagues.items():
        players = [player_id for board, player_id in found if board == board_id]
        if players:
            tiers[board_id] = league_tiers_get(cursor=cursor, place=place, player_ids=players)
    locked = sorted({board_id for board_id, _ in found})
    cohorts_lock(cursor=cursor, board_ids=locked)
    cursor.execute(_COHORT_MEMBERS_SQL, [locked])
    if any(members[board_id] != count for board_id, count in cursor.fetchall()):
        # Asked again under the locks, in the same order: those another batch assigned
        # meanwhile (or banned) drop out.
        cursor.execute(
            _COHORT_ASK_SQL,
            [array_literal([b for b, _ in found]), array_literal([p for _, p in found])],
        )
        found = [(b, p) for b, p, is_member in cursor.fetchall() if not is_member]
    if found:
        candidates = [
            CohortCandidate(board_id, player_id, tiers.get(board_id, {}).get(player_id))
            for board_id, player_id in found
        ]
        cohort_members_assign(cursor=cursor, candidates=candidates, sizes=sizes)
    _members_known_on_commit(known + found)


def _unknown_in_order(
    results: ResultColumns,
    refused: Mapping[tuple[int, int], Refusal],
    unknown: set[tuple[int, int]],
) -> list[str]:
    """``_COHORT_ASK_SQL``'s arrays: the ``unknown`` pairs whose results the batch stores (not
    refused), per board in the order of their first result."""
    first: dict[tuple[int, int], datetime] = {}
    for board_id, player_id, at, partition, offset in zip(
        results.board_ids,
        results.player_ids,
        results.achieved_at,
        results.kafka_partitions,
        results.kafka_offsets,
        strict=True,
    ):
        pair = (board_id, player_id)
        if pair not in unknown or (refused and (partition, offset) in refused):
            continue
        seen = first.get(pair)
        if seen is None or at < seen:
            first[pair] = at
    ordered = sorted(first, key=lambda pair: (pair[0], first[pair], pair[1]))
    return [array_literal([b for b, _ in ordered]), array_literal([p for _, p in ordered])]


def _members_known_on_commit(pairs: list[tuple[int, int]]) -> None:
    """Remember ``pairs`` as members once the batch's transaction commits (a rollback leaves
    them unknown: a membership it wrote never existed)."""
    if pairs:
        transaction.on_commit(lambda: KNOWN_MEMBERS.add(pairs))
