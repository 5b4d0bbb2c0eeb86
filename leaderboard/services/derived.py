"""Derived boards: top-list snapshots and weekly boards.

Projections of the boards ingestion maintains; losing them loses nothing (the read path falls
back to the live board, and a weekly board is rebuilt from the daily boards).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Collection, Iterable
from datetime import UTC, date, datetime, timedelta
from functools import cache

from django.conf import settings

from leaderboard import keys
from leaderboard.models import ScoringRule
from leaderboard.redis import BoardRedis, get_board_redis
from leaderboard.scripts import get_script
from leaderboard.selectors.boards import BoardRef, board_list_live
from leaderboard.selectors.days import board_days_with_results
from leaderboard.selectors.top import TOP_SNAPSHOT_SIZE, board_top_read, top_snapshot_row

from .rebuild import spec_args

logger = logging.getLogger(__name__)

# Entries merged per script call when building a cumulative or latest weekly board: each call
# blocks Redis, so it stays short.
WEEKLY_MERGE_CHUNK = 5000


# How long readers of a week whose on-demand build failed are told so before one tries again.
WEEKLY_BUILD_FAILED_SECONDS = 300
# An on-demand build's lock expires after this: the longest a build is waited for.
WEEKLY_BUILD_LOCK_SECONDS = 60
# Seconds a reader is told to wait while another request builds the week.
WEEKLY_BUILDING_RETRY_AFTER_SECONDS = 2


class WeeklyBuildError(RuntimeError):
    """A weekly board could not be built (e.g. a cumulative sum overflows the codec)."""


class WeeklyBoardUnavailableError(RuntimeError):
    """A week's board is missing and is being built by another request, or could not be built:
    answer "try again later" (a 503), never the missing key's empty list as the week."""

    def __init__(self, *, board: BoardRef, iso_year: int, iso_week: int, building: bool) -> None:
        week = f"{iso_year}-W{iso_week:02d}"
        if building:
            detail = f"the board {board.slug!r} of week {week} is being built; retry in a moment"
        else:
            detail = (
                f"the board {board.slug!r} of week {week} cannot be built now (a player's "
                "points for the week pass what the board can hold); staff are told in the logs"
            )
        super().__init__(detail)
        self.retry_after = (
            WEEKLY_BUILDING_RETRY_AFTER_SECONDS if building else WEEKLY_BUILD_FAILED_SECONDS
        )


def top_snapshot_refresh(*, board: BoardRef) -> int:
    """Store the board's top entries with their names, encoded once, for every API process to
    serve.

    The top is read with the Redis clock in one script (board_top.lua): that time, in
    microseconds, is the snapshot's version. The write (top_snapshot_write.lua) keeps the stored
    versions increasing: a refresh that read the board before the stored snapshot was taken
    (an overlapping or late run) writes nothing. Returns the number of entries stored.
    """
    client = get_board_redis()
    snapshot_key = keys.top_snapshot(board_id=board.id)
    version_key = keys.top_snapshot_version(board_id=board.id)
    ttl = settings.LEADERBOARD_TOP_SNAPSHOT_TTL_SECONDS
    write = get_script(client, "top_snapshot_write")
    read = board_top_read(board=board, count=TOP_SNAPSHOT_SIZE)
    # A board Redis lost, or one being recovered, must not become a snapshot that readers serve
    # as truth: its old snapshot is dropped instead (and the read path answers 503 from the live
    # board's check); the version stays, so no older refresh brings a snapshot back.
    if not read.intact:
        write(keys=[snapshot_key, version_key], args=[read.version, "", ttl])
        return 0
    # The names too (board_top_read joins them): every refresh rewrites the document under a
    # new version even when the scores did not move, so a rename or a staff hide reaches the
    # snapshot within one refresh period, and serving the top list costs no name read.
    rows = [top_snapshot_row(entry) for entry in read.entries]
    body = {
        "boardId": board.id,
        "generatedAt": time.time(),
        "version": read.version,
        "entries": rows,
    }
    stored = write(
        keys=[snapshot_key, version_key],
        args=[read.version, json.dumps(body, separators=(",", ":")), ttl],
    )
    if not int(stored):
        logger.info("top snapshot of board %s: a newer one is stored already", board.id)
        return 0
    return len(rows)


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
    if board.tiebreaks:
        return _wide_weekly_build(
            client=client, board=board, weekly=weekly, dailies=dailies, token=token, ttl=ttl
        )
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


def _wide_weekly_build(
    *,
    client: BoardRedis,
    board: BoardRef,
    weekly: str,
    dailies: list[str],
    token: str,
    ttl: int,
) -> int:
    """weekly_board_build of a board with tie-break columns: every rule merges each day's index
    (frozen with COPY) into the build by wide_weekly_merge.lua, days newest first under the
    latest rule."""
    build = keys.weekly_build_temp(board_key=weekly, token=token)
    build_index = keys.board_index(board_key=build)
    source = keys.weekly_build_source(board_key=weekly, token=token)
    merge = get_script(client, "wide_weekly_merge")
    spec = spec_args(board)
    if board.rule == ScoringRule.LATEST:
        dailies = list(reversed(dailies))
    try:
        for daily in dailies:
            if not client.copy(keys.board_index(board_key=daily), source, replace=True):
                continue
            cursor = "0"
            while True:
                try:
                    cursor, _ = merge(
                        keys=[source, build, build_index],
                        args=[cursor, WEEKLY_MERGE_CHUNK, *spec],
                    )
                except Exception as exc:
                    raise WeeklyBuildError(f"weekly board of board {board.id}: {exc}") from exc
                cursor = cursor.decode() if isinstance(cursor, bytes) else str(cursor)
                if cursor == "0":
                    break
        size = get_script(client, "wide_weekly_publish")(
            keys=[build, build_index, weekly, keys.board_index(board_key=weekly)], args=[ttl]
        )
    finally:
        client.unlink(build, build_index, source)
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


def weekly_days_kept(*, board: BoardRef, iso_year: int, iso_week: int, now: datetime) -> bool:
    """Whether every daily board of the week is still kept, so a build from them is the whole
    week: its first day within the season ended less than LEADERBOARD_DAILY_TTL_DAYS ago (a
    daily board expires that long after its day, later after a late write: this errs on the
    side of refusing). Past it, the week's Monday is gone from Redis first, and a build
    would serve the week without it as the whole week."""
    first = max(date.fromisocalendar(iso_year, iso_week, 1), board.season.starts_at.date())
    first_ends = datetime(first.year, first.month, first.day, tzinfo=UTC) + timedelta(days=1)
    return first_ends + timedelta(days=settings.LEADERBOARD_DAILY_TTL_DAYS) > now


def weekly_days_gone(
    *,
    board: BoardRef,
    iso_year: int,
    iso_week: int,
    now: datetime,
    days_with_results: Callable[[], Collection[date]],
) -> list[date]:
    """The days of the week with counted results whose daily board is no longer in Redis: a
    build from the rest would serve the week without them. None while the week is young enough
    for every daily board of it to be kept (``weekly_days_kept``); past that, the days with
    results are asked of ``days_with_results`` (PostgreSQL: the caller memoizes it)."""
    if weekly_days_kept(board=board, iso_year=iso_year, iso_week=iso_week, now=now):
        return []
    with_results = days_with_results()
    client = get_board_redis()
    return [
        day
        for day in _week_days(iso_year=iso_year, iso_week=iso_week)
        if day in with_results and not client.exists(keys.daily_board(board_id=board.id, day=day))
    ]


def weekly_board_rebuild_whole(
    *,
    board: BoardRef,
    iso_year: int,
    iso_week: int,
    now: datetime,
    days_with_results: Callable[[], Collection[date]],
) -> bool:
    """Rebuild a week's board from its daily boards only if none of its days with results has
    lost its daily board (``weekly_days_gone``; ``weekly_board_build_or_leave``); otherwise
    leave it as built, while they were all there, and log it. True if rebuilt."""
    gone = weekly_days_gone(
        board=board,
        iso_year=iso_year,
        iso_week=iso_week,
        now=now,
        days_with_results=days_with_results,
    )
    if gone:
        logger.info(
            "weekly board %s: left as built, the daily boards of %s have expired",
            keys.weekly_board(board_id=board.id, iso_year=iso_year, iso_week=iso_week),
            ", ".join(day.isoformat() for day in gone),
        )
        return False
    return weekly_board_build_or_leave(board=board, iso_year=iso_year, iso_week=iso_week)


def weekly_boards_rebuild(
    *,
    board: BoardRef,
    weeks: Iterable[tuple[int, int]],
    now: datetime,
    only_existing: bool = False,
) -> list[tuple[int, int]]:
    """Rebuild these ISO weeks' boards from the daily boards (``only_existing``: only those
    in Redis now; a missing one is built on demand); the weeks rebuilt.

    A week in Redis some of whose daily boards may have expired is left as it is
    (``weekly_days_kept``): built while they were all there, it is the better answer. A week
    that cannot be built (a cumulative sum past the codec: the daily boards hold sums the
    season-long board leaves off) is left too (``weekly_board_build_or_leave``)."""
    client = get_board_redis()
    rebuilt: list[tuple[int, int]] = []
    for iso_year, iso_week in sorted(set(weeks)):
        weekly = keys.weekly_board(board_id=board.id, iso_year=iso_year, iso_week=iso_week)
        exists = bool(client.exists(weekly))
        if only_existing and not exists:
            continue
        if exists and not weekly_days_kept(
            board=board, iso_year=iso_year, iso_week=iso_week, now=now
        ):
            logger.info(
                "weekly board %s: not rebuilt, the daily boards of its first days may have expired",
                weekly,
            )
            continue
        if weekly_board_build_or_leave(board=board, iso_year=iso_year, iso_week=iso_week):
            rebuilt.append((iso_year, iso_week))
    return rebuilt


def weekly_board_build_or_leave(*, board: BoardRef, iso_year: int, iso_week: int) -> bool:
    """``weekly_board_build``, or, for a week that cannot be built (a cumulative sum past the
    codec: the daily boards hold sums the season-long board leaves off), the week left as it
    was and logged (False): the caller's other weeks and boards go on."""
    try:
        weekly_board_build(board=board, iso_year=iso_year, iso_week=iso_week)
    except WeeklyBuildError:
        logger.exception(
            "weekly board of board %s, %d-W%02d: not rebuilt", board.id, iso_year, iso_week
        )
        return False
    return True


def weekly_board_ensure(*, board: BoardRef, iso_year: int, iso_week: int, today: date) -> bool:
    """Build a week's board on demand when it is missing; True if this call built it.

    Only weeks that have started and overlap the season are built. A lock keeps concurrent
    requests from piling up builds; the ones that don't get it, and every request for a while
    after a build failed, raise ``WeeklyBoardUnavailableError`` (the missing key would read as
    an empty week).
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
    # No daily board, no week to build: the week is empty (no result, or its days expired),
    # and is read as such rather than built (and a 503 for every reader meanwhile) each time.
    # One EXISTS: a board's keys share its slot.
    if not client.exists(*[keys.daily_board(board_id=board.id, day=day) for day in days]):
        return False
    failed = keys.weekly_build_failed(board_key=weekly)
    if client.exists(failed):
        raise WeeklyBoardUnavailableError(
            board=board, iso_year=iso_year, iso_week=iso_week, building=False
        )
    lock = keys.weekly_build_lock(board_key=weekly)
    if not client.set(lock, "1", nx=True, ex=WEEKLY_BUILD_LOCK_SECONDS):
        raise WeeklyBoardUnavailableError(
            board=board, iso_year=iso_year, iso_week=iso_week, building=True
        )
    try:
        weekly_board_build(board=board, iso_year=iso_year, iso_week=iso_week)
    except WeeklyBuildError as exc:
        logger.exception(
            "weekly board of board %s, %d-W%02d: not built", board.id, iso_year, iso_week
        )
        client.set(failed, "1", ex=WEEKLY_BUILD_FAILED_SECONDS)
        raise WeeklyBoardUnavailableError(
            board=board, iso_year=iso_year, iso_week=iso_week, building=False
        ) from exc
    finally:
        client.delete(lock)
    return True


def weekly_build_on_demand_wait(
    *, client: BoardRedis, weekly: str, poll_seconds: float = 0.05
) -> None:
    """Return once no request builds the week ``weekly`` on demand (weekly_board_ensure holds
    its lock from the daily boards' copy to the publish), or the lock's expiry has passed."""
    lock = keys.weekly_build_lock(board_key=weekly)
    deadline = time.monotonic() + WEEKLY_BUILD_LOCK_SECONDS
    while client.exists(lock) and time.monotonic() < deadline:
        time.sleep(poll_seconds)


def weekly_boards_build(*, now: datetime) -> dict[str, int]:
    """Rebuild the current ISO week's board of every live board (and, on Mondays, the
    previous week's, which may still have received late results for Sunday), then the past
    weeks late results were written to since (``weekly_late_rebuild``)."""
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
        # The marked weeks first: on a Monday the previous week is usually marked (results of
        # Sunday applied after midnight), and is then not built a second time below.
        late = weekly_late_rebuild(board=board, now=now)
        for iso_year, iso_week in late:
            built[f"{board.id}:{iso_year}-W{iso_week:02d}"] = int(
                client.zcard(
                    keys.weekly_board(board_id=board.id, iso_year=iso_year, iso_week=iso_week)
                )
            )
        for iso_year, iso_week in weeks:
            if (iso_year, iso_week) in late:
                continue
            try:
                built[f"{board.id}:{iso_year}-W{iso_week:02d}"] = weekly_board_build(
                    board=board, iso_year=iso_year, iso_week=iso_week
                )
            except Exception:
                logger.exception("weekly board build failed for board %s", board.id)
    return built


def weekly_late_rebuild(*, board: BoardRef, now: datetime) -> list[tuple[int, int]]:
    """Rebuild the past weeks of the board that late results were written to (the marks
    ``board_groups_apply`` leaves after its writes, ``keys.weekly_late``); the weeks rebuilt.

    Each mark is taken (SREM) before its week is rebuilt, so a result marked meanwhile marks
    it again for the next run; a build that fails puts its mark back. A week that is not in
    Redis is left to be built on demand; one with a day of results whose daily board has
    expired is left as built (``weekly_days_gone``), and logged."""
    client = get_board_redis()
    marks = keys.weekly_late(board_id=board.id)
    days_with_results = cache(lambda: set(board_days_with_results(board=board)))
    rebuilt: list[tuple[int, int]] = []
    for raw in sorted(client.smembers(marks)):
        client.srem(marks, raw)
        week = raw.decode() if isinstance(raw, bytes) else str(raw)
        try:
            iso_year, iso_week = int(week[:4]), int(week[6:])
            date.fromisocalendar(iso_year, iso_week, 1)
        except ValueError:
            logger.warning("weekly board of board %s: mark %r is not a week", board.id, week)
            continue
        weekly = keys.weekly_board(board_id=board.id, iso_year=iso_year, iso_week=iso_week)
        try:
            if not client.exists(weekly):
                continue
            if weekly_board_rebuild_whole(
                board=board,
                iso_year=iso_year,
                iso_week=iso_week,
                now=now,
                days_with_results=days_with_results,
            ):
                rebuilt.append((iso_year, iso_week))
        except Exception:
            client.sadd(marks, raw)
            logger.exception("late results' weekly board %s of board %s failed", week, board.id)
    return rebuilt
