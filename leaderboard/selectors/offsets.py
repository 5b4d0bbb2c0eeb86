"""The Kafka offsets of a board's stored results: what a recovered board's watermark may cover,
and which results a Redis failover may have lost."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from django.db import connection

from ._sql import RESULTS
from .boards import BoardRef


def board_stored_offsets(*, board: BoardRef) -> dict[int, int]:
    """Kafka partition -> the highest offset of the board's stored results (voided, banned and
    all): what a board rebuilt from PostgreSQL read after this moment already counts, so its
    applied-offset watermark may cover it (docs/ingestion.md, "Redis losing data").

    A scan of the board's rows (no index carries the Kafka columns: every stored result would
    pay for one); it runs only when a board is recovered or repaired, next to a rebuild that
    reads all of them anyway.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT kafka_partition, MAX(kafka_offset) FROM {RESULTS}"  # noqa: S608
            " WHERE board_id = %s AND kafka_partition IS NOT NULL GROUP BY kafka_partition",
            [board.id],
        )
        return {int(partition): int(offset) for partition, offset in cursor.fetchall()}


@dataclass(frozen=True, slots=True)
class OffsetGap:
    """Offsets of one Kafka partition a board should hold but may not: (low, high), exclusive."""

    board_id: int
    partition: int
    low: int  # the board's watermark for the partition (-1: none)
    high: int  # the consumer group's committed offset (the next one it will read)


def boards_days_with_results_in_gaps(*, gaps: Sequence[OffsetGap]) -> dict[int, set[date]]:
    """board -> the UTC days of its counted results stored from an offset inside one of its
    gaps: the board (season-long and those days) misses them if Redis lost them.

    Reads each board's results through the board's index (no index on the offsets: this runs
    only after a Redis failover, and one index less is one write less per result).
    """
    if not gaps:
        return {}
    sql = f"""
        SELECT DISTINCT m.board_id, (m.achieved_at AT TIME ZONE 'UTC')::date
        FROM {RESULTS} m
        JOIN unnest(%s::bigint[], %s::int[], %s::bigint[], %s::bigint[])
             AS g(board_id, part, low, high)
          ON m.board_id = g.board_id AND m.kafka_partition = g.part
         AND m.kafka_offset > g.low AND m.kafka_offset < g.high
        WHERE m.voided_at IS NULL
    """  # noqa: S608
    params = [
        [gap.board_id for gap in gaps],
        [gap.partition for gap in gaps],
        [gap.low for gap in gaps],
        [gap.high for gap in gaps],
    ]
    found: dict[int, set[date]] = {}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for board_id, day in cursor.fetchall():
            found.setdefault(int(board_id), set()).add(day)
    return found
