"""Derived boards: top-list snapshots and weekly boards.

Projections of the boards ingestion maintains; losing them loses nothing (the read path falls
back to the live board, and a weekly board is rebuilt from the daily boards).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from datetime import date, datetime, timedelta
from typing import cast

from django.conf import settings

from leaderboard import keys
from leaderboard.models import ScoringRule
from leaderboard.redis import BoardRedis, get_board_redis
from leaderboard.scripts import get_script
from leaderboard.selectors import TOP_SNAPSHOT_SIZE, BoardRef, board_list_live, ranked_entries

from .rebuild import spec_args

logger = logging.getLogger(__name__)

# Entries merged per script call when building a cumulative or latest weekly board: each call
# blocks Redis, so it stays short.
WEEKLY_MERGE_CHUNK = 5000


class WeeklyBuildError(RuntimeError):
    """A weekly board could not be built (e.g. a cumulative sum overflows the codec)."""


def top_snapshot_refresh(*, board: BoardRef) -> int:
    """Store the board's top entries, encoded once, for every API process to serve.

    One ZREVRANGE; the ranks are derived here (the slice starts at rank 1). Returns the
    number of entries stored.
    """
    client = get_board_redis()
    # The intact key and the top in one MULTI (one slot): a board Redis lost, or one being
    # recovered, must not become a snapshot that readers serve as truth; its old snapshot is
    # dropped instead, and the read path answers 503 from the live board's check.
    pipe = client.pipeline(transaction=True)
    pipe.exists(keys.board_intact(board_id=board.id))
    # Scores stay as Redis sends them: a float cast would be exact too, but the codec and
    # the rank derivation compare the exact strings.
    pipe.zrevrange(
        keys.board(board_id=board.id),
        0,
        TOP_SNAPSHOT_SIZE - 1,
        withscores=True,
        score_cast_func=bytes,
    )
    intact, pairs = pipe.execute()
    if not intact:
        client.delete(keys.top_snapshot(board_id=board.id))
        return 0
    flat = [cast(bytes, item) for pair in pairs for item in pair]
    entries = ranked_entries(flat=flat, start=0, first_rank=1, codec=board.codec)
    rows = [[entry.rank, entry.player_id, entry.points] for entry in entries]
    rows_json = json.dumps(rows, separators=(",", ":"))
    body = {
        "boardId": board.id,
        "generatedAt": time.time(),
        "version": hashlib.blake2b(rows_json.encode(), digest_size=8).hexdigest(),
        "entries": rows,
    }
    client.set(
        keys.top_snapshot(board_id=board.id),
        json.dumps(body, separators=(",", ":")),
        ex=settings.LEADERBOARD_TOP_SNAPSHOT_TTL_SECONDS,
    )
    return len(entries)


def top_snapshots_refresh() -> dict[int, int]:
    """Refresh the snapshot of every live board; {board id: entries stored}."""
    refreshed: dict[int, int] = {}
    # Closing seasons' boards still move while the consumer drains their last results.
    for board in board_list_live():
        try:
            refreshed[board.id] = top_snapshot_refresh(board=board)
        except Exception:
            # One board's failure must not starve the others of their refresh.
            logger.exception("top snapshot refresh failed for board %s", board.id)
    return refreshed


def _week_days(*, iso_year: int, iso_week: int) -> list[date]:
    monday = date.fromisocalendar(iso_year, iso_week, 1)
    return [monday + timedelta(days=offset) for offset in range(7)]


def weekly_board_build(*, board: BoardRef, iso_year: int, iso_week: int) -> int:
    """(Re)build an ISO week's board from its daily boards; returns its number of players.

    best: ZUNIONSTORE ... AGGREGATE MAX (the better encoded score keeps the earliest time, in
    either order: an asc board's encoding is inverted). cumulative and latest: each daily board
    is frozen with COPY and merged chunk by chunk by a script (weekly_merge.lua) that adds the
    points up (cumulative), or keeps the newest day's value (latest: days newest first). Either
    way the result lands in a private key that replaces the weekly board atomically.
    """
    client = get_board_redis()
    weekly = keys.weekly_board(board_id=board.id, iso_year=iso_year, iso_week=iso_week)
    dailies = [
        keys.daily_board(board_id=board.id, day=day)
        for day in _week_days(iso_year=iso_year, iso_week=iso_week)
    ]
    token = uuid.uuid4().hex
    build = keys.weekly_build_temp(board_key=weekly, token=token)
    ttl = settings.LEADERBOARD_WEEKLY_BOARD_TTL_SECONDS
    try:
        if board.rule == ScoringRule.BEST:
            client.zunionstore(build, dailies, aggregate="MAX")
        else:
            if board.rule == ScoringRule.LATEST:
                dailies.reverse()
            source = keys.weekly_build_source(board_key=weekly, token=token)
            _days_merge(client=client, board=board, dailies=dailies, source=source, build=build)
        size = get_script(client, "weekly_publish")(keys=[build, weekly], args=[ttl])
    finally:
        client.unlink(build)
    return int(size)


def _days_merge(
    *, client: BoardRedis, board: BoardRef, dailies: list[str], source: str, build: str
) -> None:
    merge = get_script(client, "weekly_merge")
    spec = spec_args(board)
    try:
        for daily in dailies:
            # A frozen copy: today's board moves while it is merged, and a moving index
            # would skip or double-count players.
            if not client.copy(daily, source, replace=True):
                continue
            start = 0
            while True:
                try:
                    merged = int(
                        merge(
                            keys=[source, build],
                            args=[start, start + WEEKLY_MERGE_CHUNK - 1, *spec],
                        )
                    )
                except Exception as exc:
                    raise WeeklyBuildError(f"weekly board of board {board.id}: {exc}") from exc
                if merged < WEEKLY_MERGE_CHUNK:
                    break
                start += WEEKLY_MERGE_CHUNK
    finally:
        client.unlink(source)


def weekly_board_ensure(*, board: BoardRef, iso_year: int, iso_week: int, today: date) -> bool:
    """Build a week's board on demand when it is missing; True if this call built it.

    Only weeks that have started and overlap the season are built. A lock keeps concurrent
    requests from piling up builds; the ones that don't get it read what is there.
    """
    days = _week_days(iso_year=iso_year, iso_week=iso_week)
    season = board.season
    if days[0] > today or days[-1] < season.starts_at.date() or days[0] > season.ends_at.date():
        return False
    client = get_board_redis()
    weekly = keys.weekly_board(board_id=board.id, iso_year=iso_year, iso_week=iso_week)
    if client.exists(weekly):
        return False
    # Built from lost or half-recovered daily boards it would outlive their recovery.
    if not client.exists(keys.board_intact(board_id=board.id)):
        return False
    lock = keys.weekly_build_lock(board_key=weekly)
    if not client.set(lock, "1", nx=True, ex=60):
        return False
    try:
        weekly_board_build(board=board, iso_year=iso_year, iso_week=iso_week)
    finally:
        client.delete(lock)
    return True


def weekly_boards_build(*, now: datetime) -> dict[str, int]:
    """Rebuild the current ISO week's board of every live board (and, on Mondays, the
    previous week's, which may still have received late results for Sunday)."""
    today = now.date()
    weeks = [today.isocalendar()[:2]]
    if today.isoweekday() == 1:
        weeks.append((today - timedelta(days=7)).isocalendar()[:2])
    built: dict[str, int] = {}
    client = get_board_redis()
    for board in board_list_live():
        # A lost board's weekly boards are rebuilt by its recovery, after its daily boards.
        if not client.exists(keys.board_intact(board_id=board.id)):
            continue
        for iso_year, iso_week in weeks:
            try:
                built[f"{board.id}:{iso_year}-W{iso_week:02d}"] = weekly_board_build(
                    board=board, iso_year=iso_year, iso_week=iso_week
                )
            except Exception:
                logger.exception("weekly board build failed for board %s", board.id)
    return built
