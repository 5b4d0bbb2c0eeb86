"""Repair what a Redis failover lost: writes a dead master acknowledged but never replicated.

Redis replicates asynchronously. A master can acknowledge an ``apply_results`` call (the board
written, its watermark moved), let the consumer commit the Kafka offsets, and die before its
replica received the write; the promoted replica then lacks those results, and Kafka will not
deliver them again. PostgreSQL still has them (stored before Redis, committed offsets only
after both), with the partition and offset they came from, so the loss is found exactly: a
board lost writes iff it has a counted result stored from an offset above its watermark for
that partition but below the group's committed offset. Those boards (season-long, the days
of the missing results, and the weekly boards in Redis of those days' weeks) are rebuilt from
PostgreSQL, which keeps writes made meanwhile, and
their watermark is raised to the committed offset (docs/ingestion.md, "Guarantees").
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date

from django.utils import timezone

from leaderboard import keys
from leaderboard.redis import get_board_redis
from leaderboard.scripts import get_script
from leaderboard.selectors.boards import board_list_live
from leaderboard.selectors.offsets import OffsetGap, boards_days_with_results_in_gaps

from .apply import applied_offsets_get
from .derived import weekly_boards_rebuild
from .rebuild import SeasonClosedError, board_rebuild

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BoardRepaired:
    board_id: int
    days: tuple[date, ...]  # the daily boards rebuilt along with the season-long one


def boards_lost_writes_repair(*, topic: str, committed: Mapping[int, int]) -> list[BoardRepaired]:
    """Find the live boards that miss results of ``topic`` below ``committed`` (partition ->
    the consumer group's committed offset, i.e. the next offset it reads) and rebuild them.

    Raises ``redis.RedisError`` while a slot has no master (the caller tries again later) and
    ``RebuildInProgressError`` when a board is already being rebuilt (idem: its rebuild may
    have started before the loss).
    """
    boards = board_list_live()
    partitions = sorted(committed)
    if not boards or not partitions:
        return []
    marks = applied_offsets_get(
        topic=topic, partitions=partitions, board_ids=[board.id for board in boards]
    )
    gaps = [
        OffsetGap(board_id=board.id, partition=p, low=marks[(board.id, p)], high=committed[p])
        for board in boards
        for p in partitions
        if marks[(board.id, p)] < committed[p] - 1
    ]
    missing = boards_days_with_results_in_gaps(gaps=gaps)
    by_id = {board.id: board for board in boards}
    client = get_board_redis()
    raise_watermark = get_script(client, "watermark_raise")
    repaired: list[BoardRepaired] = []
    for board_id, days in sorted(missing.items()):
        ordered = tuple(sorted(days))
        logger.warning(
            "board %d misses results of %s that Redis had acknowledged (failover?): rebuilding "
            "it and its days %s from PostgreSQL",
            board_id,
            topic,
            [day.isoformat() for day in ordered],
        )
        try:
            for day in (None, *ordered):
                board_rebuild(
                    board_id=board_id, day=day, reason="lost writes after a Redis failover"
                )
        except SeasonClosedError:
            continue  # closed meanwhile: its keys went with the close-out, nothing to repair
        # A weekly board is built from the daily ones: those in Redis for a repaired day's week
        # follow them (the late-week mark the lost write set may be lost with it).
        weekly_boards_rebuild(
            board=by_id[board_id],
            weeks=[day.isocalendar()[:2] for day in ordered],
            now=timezone.now(),
            only_existing=True,
        )
        # Every result below the committed offsets is in PostgreSQL, hence now on the board.
        args: list[int] = []
        for gap in gaps:
            if gap.board_id == board_id:
                args += [gap.partition, gap.high - 1]
        raise_watermark(
            keys=[keys.ingest_applied_offsets(board_id=board_id, topic=topic)], args=args
        )
        repaired.append(BoardRepaired(board_id=board_id, days=ordered))
    return repaired
