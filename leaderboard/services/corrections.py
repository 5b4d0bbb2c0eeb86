"""Corrections: voided results and banned players, and the boards rebuilt after them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, date

import redis
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone

from leaderboard import keys
from leaderboard.board_scores import board_days_with_results
from leaderboard.models import MatchResult, PlayerBan
from leaderboard.redis import get_board_redis
from seasons.models import (
    Season,
    SeasonStatus,
)
from seasons.selectors import SeasonRef

from .derived import weekly_board_build
from .rebuild import RebuildResult, board_rebuild


@dataclass(frozen=True, slots=True)
class BoardsCorrected:
    season_id: int
    rebuilt: tuple[str, ...]  # board keys rebuilt from PostgreSQL (season, daily, weekly)
    # A closed season has no live boards: its final standings and grants need a review instead
    # (season_standings_review / season_standings_correct).
    needs_standings_review: bool

    def describe(self) -> str:
        if self.needs_standings_review:
            return (
                f"season {self.season_id} is closed: review the corrected final standings and "
                "grants (season action) before they apply"
            )
        return f"season {self.season_id}: {len(self.rebuilt)} board(s) rebuilt"


def boards_correct(*, season_id: int, days: Iterable[date]) -> BoardsCorrected:
    """Rebuild what a correction touched: the season board, the given days' daily boards that
    exist, and the weekly boards that exist for those days' weeks.

    Raises RebuildInProgressError when one of them is being rebuilt: that rebuild may read a
    snapshot from before the correction, so the caller retries (the task does) rather than
    skip it.
    """
    season = Season.objects.get(pk=season_id)
    if season.status == SeasonStatus.CLOSED:
        return BoardsCorrected(season_id, (), needs_standings_review=True)
    client = get_board_redis()
    rebuilt = [board_rebuild(season_id=season_id, reason="correction").board_key]
    # A daily board that expired stays expired: nothing reads it any more.
    existing = [
        d for d in sorted(set(days)) if client.exists(keys.daily_board(season_id=season_id, day=d))
    ]
    for day in existing:
        rebuilt.append(board_rebuild(season_id=season_id, day=day, reason="correction").board_key)
    rebuilt += _weekly_boards_rebuild(client, season=season, days=days)
    return BoardsCorrected(season_id, tuple(rebuilt), needs_standings_review=False)


def _weekly_boards_rebuild(
    client: redis.Redis, *, season: Season, days: Iterable[date]
) -> list[str]:
    """Rebuild the weekly boards that exist for the weeks of ``days`` from the daily boards."""
    weeks = {(d.isocalendar().year, d.isocalendar().week) for d in days}
    ref = SeasonRef.from_model(season)
    rebuilt: list[str] = []
    for iso_year, iso_week in sorted(weeks):
        weekly = keys.weekly_board(season_id=season.id, iso_year=iso_year, iso_week=iso_week)
        # A missing weekly board is built on demand from the (now corrected) daily boards.
        if client.exists(weekly):
            weekly_board_build(season=ref, iso_year=iso_year, iso_week=iso_week)
            rebuilt.append(weekly)
    return rebuilt


def daily_boards_existing(*, season_id: int) -> list[date]:
    """The days whose daily board is in Redis now (SCAN; rebuild leftovers filtered out)."""
    client = get_board_redis()
    days = set()
    for raw in client.scan_iter(match=keys.daily_board_pattern(season_id=season_id), count=1000):
        key = raw.decode() if isinstance(raw, bytes) else str(raw)
        day = keys.daily_board_day(season_id=season_id, key=key)
        if day is not None:
            days.add(day)
    return sorted(days)


@dataclass(frozen=True, slots=True)
class SeasonBoardsRebuilt:
    season_id: int
    season_board: RebuildResult
    daily_boards: tuple[RebuildResult, ...]
    weekly_boards: tuple[str, ...]  # keys of the weekly boards rebuilt from the daily ones

    def describe(self) -> str:
        overflowed = {p for r in (self.season_board, *self.daily_boards) for p in r.overflowed}
        text = (
            f"season {self.season_id}: season board rebuilt ({self.season_board.members} "
            f"players), {len(self.daily_boards)} daily and {len(self.weekly_boards)} weekly "
            "board(s)"
        )
        if overflowed:
            text += f"; {len(overflowed)} player(s) left off for overflowing the codec"
        return text


def season_boards_rebuild(
    *,
    season_id: int,
    all_days: bool = False,
    reason: str = "",
    progress: Callable[[str], Callable[[int], None] | None] | None = None,
) -> SeasonBoardsRebuilt:
    """Rebuild the season board, then its daily boards, then the weekly boards built from them.

    Daily boards: those in Redis now; with ``all_days`` also every day with a counted result
    (boards that had expired come back, with the default daily expiry). ``progress(board)``
    may return a per-board progress callback (the command's bars).
    Raises RebuildInProgressError when one of the boards is being rebuilt.
    """
    season = Season.objects.get(pk=season_id)
    client = get_board_redis()

    def bar(board: str) -> Callable[[int], None] | None:
        return progress(board) if progress is not None else None

    season_result = board_rebuild(season_id=season_id, reason=reason, progress=bar("season"))
    days = set(daily_boards_existing(season_id=season_id))
    if all_days:
        days.update(board_days_with_results(season=season))
    daily = tuple(
        board_rebuild(season_id=season_id, day=day, reason=reason, progress=bar(day.isoformat()))
        for day in sorted(days)
    )
    weekly = _weekly_boards_rebuild(client, season=season, days=days)
    return SeasonBoardsRebuilt(season_id, season_result, daily, tuple(weekly))


@dataclass(frozen=True, slots=True)
class Correction:
    season_id: int
    days: tuple[date, ...]  # the UTC days whose boards the correction touches
    changed: bool  # False when it was already in effect (voided before, banned before)


def match_result_void(*, result_id: int, reason: str) -> Correction:
    """Void a result: it stays for audit, no longer counts. The boards are corrected by
    boards_correct (the caller queues it: a season board rebuild is not a request's work)."""
    reason = reason.strip()
    if not reason:
        raise ValidationError("a void needs a reason")
    with transaction.atomic():
        result = MatchResult.objects.select_for_update().get(pk=result_id)
        changed = result.voided_at is None
        if changed:
            result.voided_at = timezone.now()
            result.void_reason = reason[:500]
            result.save(update_fields=["voided_at", "void_reason"])
    return Correction(result.season_id, (result.achieved_at.astimezone(UTC).date(),), changed)


def player_ban(
    *, season_id: int, player_id: int, reason: str, created_by_id: int | None = None
) -> Correction:
    """Ban a player from a season: none of their results count. Boards: see boards_correct."""
    reason = reason.strip()
    if not reason:
        raise ValidationError("a ban needs a reason")
    if player_id <= 0:
        raise ValidationError(f"player ids are positive integers, got {player_id}")
    _, created = PlayerBan.objects.get_or_create(
        season_id=season_id,
        player_id=player_id,
        defaults={"reason": reason[:500], "created_by_id": created_by_id},
    )
    return Correction(season_id, _player_days(season_id=season_id, player_id=player_id), created)


def player_unban(*, season_id: int, player_id: int) -> Correction:
    deleted, _ = PlayerBan.objects.filter(season_id=season_id, player_id=player_id).delete()
    days = _player_days(season_id=season_id, player_id=player_id)
    return Correction(season_id, days, bool(deleted))


def _player_days(*, season_id: int, player_id: int) -> tuple[date, ...]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT (achieved_at AT TIME ZONE 'UTC')::date FROM ingestion_matchresult"
            " WHERE season_id = %s AND player_id = %s ORDER BY 1",
            [season_id, player_id],
        )
        return tuple(row[0] for row in cursor.fetchall())
