"""Corrections: voided results and banned players, and the boards rebuilt after them."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date
from functools import cache

from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone
from redis.exceptions import RedisError

from leaderboard import keys
from leaderboard.models import Board, MatchResult, PlayerBan
from leaderboard.rank_events import RankEventsNotDelivered
from leaderboard.redis import BoardRedis, get_board_redis
from leaderboard.selectors.boards import BoardRef, board_get, board_list
from leaderboard.selectors.days import board_days_with_results
from seasons.models import Season, SeasonStatus

from .derived import (
    weekly_board_build_or_leave,
    weekly_board_rebuild_whole,
    weekly_build_on_demand_wait,
)
from .events import (
    CorrectionSubject,
    correction_events_begin,
    correction_events_end,
    rank_events_corrections_relay,
)
from .rebuild import RebuildResult, board_rebuild
from .reconcile import board_days_in_window

logger = logging.getLogger(__name__)

_RESULTS = MatchResult._meta.db_table
_BOARDS = Board._meta.db_table


@dataclass(frozen=True, slots=True)
class BoardsCorrected:
    season_id: int
    rebuilt: tuple[str, ...]  # keys rebuilt from PostgreSQL (season-long, daily, weekly)
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


def boards_correct(
    *,
    season_id: int,
    days: Iterable[date],
    board_ids: Iterable[int] | None = None,
    subjects: Sequence[CorrectionSubject] = (),
) -> BoardsCorrected:
    """Rebuild what a correction touched on each board (``board_ids``, default every board of
    the season): its season-long board, the given days' daily boards that exist or have not
    expired, and the weekly boards that exist for those days' weeks.

    ``subjects``: the players the correction concerns; each whose rank on a board moved gets a
    rank_changed event (services/events.py), published before this returns, or
    CorrectionEventsPending raised when Kafka does not take them.

    Raises RebuildInProgressError when one of them is being rebuilt: that rebuild may read a
    snapshot from before the correction, so the caller retries (the task does) rather than
    skip it.
    """
    season = Season.objects.get(pk=season_id)
    if season.status == SeasonStatus.CLOSED:
        return BoardsCorrected(season_id, (), needs_standings_review=True)
    client = get_board_redis()
    wanted = None if board_ids is None else set(board_ids)
    days = sorted(set(days))
    rebuilt: list[str] = []
    corrected: list[int] = []
    now = timezone.now()
    for board in board_list(season_id=season_id):
        if wanted is not None and board.id not in wanted:
            continue
        concerned = [s for s in subjects if s.board_id in (None, board.id)]
        correction_events_begin(board=board, subjects=concerned)
        rebuilt.append(board_rebuild(board_id=board.id, reason="correction").board_key)
        correction_events_end(board=board, subjects=concerned)
        corrected.append(board.id)
        # A daily board that expired stays expired: nothing reads it any more. One within its
        # expiry may be missing too (its only player banned, now unbanned): it comes back.
        # Which days are within it is asked of PostgreSQL only for a day with no board.
        due = cache(lambda board=board: set(board_days_in_window(board=board, now=now)))
        for day in days:
            if client.exists(keys.daily_board(board_id=board.id, day=day)) or day in due():
                result = board_rebuild(board_id=board.id, day=day, reason="correction")
                rebuilt.append(result.board_key)
        weekly = _weekly_boards_rebuild(client, board=board, days=days)
        rebuilt += weekly
        banned = {s.player_id for s in concerned if s.cause.startswith("ban:")}
        if banned:
            _weekly_left_banned_remove(
                client, board=board, days=days, rebuilt=weekly, players=banned
            )
    if subjects:
        try:
            rank_events_corrections_relay(board_ids=corrected)
        except RankEventsNotDelivered as error:
            raise CorrectionEventsPending(board_ids=tuple(corrected)) from error
    return BoardsCorrected(season_id, tuple(rebuilt), needs_standings_review=False)


class CorrectionEventsPending(Exception):
    """The boards are corrected, but Kafka did not take their rank_changed events: they wait
    in the boards' corrections outboxes (``rank_events_corrections_relay`` sends them; the
    caller retries that, not the rebuilds)."""

    def __init__(self, *, board_ids: tuple[int, ...]) -> None:
        super().__init__(f"board(s) {list(board_ids)} corrected; their rank events not sent yet")
        self.board_ids = board_ids


def _weekly_boards_rebuild(
    client: BoardRedis, *, board: BoardRef, days: Iterable[date], days_whole: bool = False
) -> list[str]:
    """Rebuild the weekly boards that exist for the weeks of ``days`` from the daily boards.

    A week is rebuilt only while every day of it with a counted result still has its daily
    board in Redis: rebuilt from fewer, it would lose every player of the days gone, so it is
    left as it was built, while they were all there (and logged). Which days have results is
    asked of PostgreSQL only when a week is old enough for its first days' boards to have
    expired (``weekly_days_kept``). ``days_whole``: the caller brought every day with a result
    back first (``board_all_rebuild(all_days=True)``)."""
    weeks = sorted({(d.isocalendar().year, d.isocalendar().week) for d in days})
    now = timezone.now()
    days_with_results = cache(lambda: set(board_days_with_results(board=board)))
    rebuilt: list[str] = []
    for iso_year, iso_week in weeks:
        weekly = keys.weekly_board(board_id=board.id, iso_year=iso_year, iso_week=iso_week)
        # A missing weekly board is built on demand from the (now corrected) daily boards.
        # But a request may be building it already, from daily boards it copied before this
        # correction rebuilt them: once it has published, the week is rebuilt here.
        if not client.exists(weekly):
            weekly_build_on_demand_wait(client=client, weekly=weekly)
            if not client.exists(weekly):
                continue
        # A week that cannot be built stays as it was; the other weeks and boards go on.
        if (
            weekly_board_build_or_leave(board=board, iso_year=iso_year, iso_week=iso_week)
            if days_whole
            else weekly_board_rebuild_whole(
                board=board,
                iso_year=iso_year,
                iso_week=iso_week,
                now=now,
                days_with_results=days_with_results,
            )
        ):
            rebuilt.append(weekly)
    return rebuilt


def _weekly_left_banned_remove(
    client: BoardRedis,
    *,
    board: BoardRef,
    days: Iterable[date],
    rebuilt: Sequence[str],
    players: set[int],
) -> None:
    """Take banned players off the weekly boards of ``days``' weeks that were left as built
    (``_weekly_boards_rebuild``: their first days' boards may have expired). The rest of such a
    week cannot be recomputed, but a banned player's entry is known to be wrong whatever the
    days gone held. A voided result or a lifted ban on such a week stays as it was built."""
    weeks = sorted({(d.isocalendar().year, d.isocalendar().week) for d in days})
    ordered = sorted(players)
    for iso_year, iso_week in weeks:
        weekly = keys.weekly_board(board_id=board.id, iso_year=iso_year, iso_week=iso_week)
        if weekly in rebuilt:
            continue
        if board.tiebreaks:
            index = keys.board_index(board_key=weekly)
            held = client.hmget(index, ordered)
            members = [
                f"{key.decode() if isinstance(key, bytes) else key}{player}"
                for player, key in zip(ordered, held, strict=True)
                if key is not None
            ]
            if members:
                client.zrem(weekly, *members)
                client.hdel(index, *[str(p) for p in ordered])
        else:
            client.zrem(weekly, *[str(p) for p in ordered])


def daily_boards_existing(*, board_id: int) -> list[date]:
    """The days whose daily board is in Redis now (SCAN; rebuild leftovers filtered out)."""
    client = get_board_redis()
    days = set()
    for raw in client.scan_iter(match=keys.daily_board_pattern(board_id=board_id), count=1000):
        key = raw.decode() if isinstance(raw, bytes) else str(raw)
        day = keys.daily_board_day(board_id=board_id, key=key)
        if day is not None:
            days.add(day)
    return sorted(days)


@dataclass(frozen=True, slots=True)
class BoardRebuilt:
    board: BoardRef
    season_long: RebuildResult
    daily_boards: tuple[RebuildResult, ...]
    weekly_boards: tuple[str, ...]  # keys of the weekly boards rebuilt from the daily ones

    def describe(self) -> str:
        overflowed = {p for r in (self.season_long, *self.daily_boards) for p in r.overflowed}
        text = (
            f"board {self.board.slug!r} of season {self.board.season_id}: "
            f"{self.season_long.members} players, {len(self.daily_boards)} daily and "
            f"{len(self.weekly_boards)} weekly board(s)"
        )
        if overflowed:
            text += f"; {len(overflowed)} player(s) left off for overflowing the codec"
        return text


def board_all_rebuild(
    *,
    board_id: int,
    all_days: bool = False,
    reason: str = "",
    progress: Callable[[str], Callable[[int], None] | None] | None = None,
) -> BoardRebuilt:
    """Rebuild a board's season-long set, then its daily boards, then the weekly boards built
    from them.

    Daily boards: those in Redis now; with ``all_days`` also every day with a counted result
    (boards that had expired come back, with the default daily expiry). ``progress(name)``
    may return a per-board progress callback (the command's bars).
    Raises RebuildInProgressError when one of the boards is being rebuilt.
    """
    board = board_get(board_id=board_id)
    client = get_board_redis()

    def bar(name: str) -> Callable[[int], None] | None:
        return progress(f"{board.slug} {name}") if progress is not None else None

    season_long = board_rebuild(board_id=board_id, reason=reason, progress=bar("season"))
    days = set(daily_boards_existing(board_id=board_id))
    if all_days:
        days.update(board_days_with_results(board=board))
    daily = tuple(
        board_rebuild(board_id=board_id, day=day, reason=reason, progress=bar(day.isoformat()))
        for day in sorted(days)
    )
    weekly = _weekly_boards_rebuild(client, board=board, days=days, days_whole=all_days)
    return BoardRebuilt(board, season_long, daily, tuple(weekly))


@dataclass(frozen=True, slots=True)
class Correction:
    season_id: int
    days: tuple[date, ...]  # the UTC days whose boards the correction touches
    changed: bool  # False when it was already in effect (voided before, banned before)
    # The boards it touches: a void, the results' boards; a ban, every board (None).
    board_ids: tuple[int, ...] | None = None
    # The players it moves, for their rank_changed events (none when nothing changed).
    subjects: tuple[CorrectionSubject, ...] = ()
    voided: int = 0  # results a void newly voided


_LOCK_SEASON_SQL = f"SELECT 1 FROM {Season._meta.db_table} WHERE id = %s FOR SHARE"  # noqa: S608


def _season_corrections_lock(*, season_id: int) -> None:
    """Hold the season FOR SHARE until the correction commits: it waits for a close-out
    finalizing the season (FOR UPDATE, for as long as its standings take), and a close-out
    finds the season locked (SKIP LOCKED: it tries again) while a correction is being written.
    So a correction lands either before the close-out's snapshot, and counts in its standings,
    or after the season is closed, when boards_correct sees "closed" and asks for the
    standings review: never inside the close-out, counted by neither."""
    with connection.cursor() as cursor:
        cursor.execute(_LOCK_SEASON_SQL, [season_id])


def _standings_before_keep(
    *,
    season_id: int,
    board_ids: Collection[int] | None,
    subjects: Sequence[CorrectionSubject],
) -> None:
    """Keep the standing of each player a correction moves, before it commits. Once it has
    committed, any rebuild of the board (this correction's task, another correction's, the
    reconcile) may apply it first; the task's own keep would then find the player already moved
    and emit nothing. The task keeps them too (the first kept stays), so a Redis that cannot be
    reached now loses only that guarantee, not the correction."""
    if not subjects:
        return
    try:
        for board in board_list(season_id=season_id):
            if board_ids is not None and board.id not in board_ids:
                continue
            concerned = [s for s in subjects if s.board_id in (None, board.id)]
            correction_events_begin(board=board, subjects=concerned)
    except RedisError:
        logger.warning(
            "season %s: the standings before a correction not kept (Redis unavailable); its "
            "task keeps them when it runs",
            season_id,
            exc_info=True,
        )


def match_result_void(*, result_id: int, reason: str) -> Correction:
    """Void a result: it stays for audit, no longer counts. See match_results_void."""
    (correction,) = match_results_void(result_ids=[result_id], reason=reason)
    return correction


def match_results_void(*, result_ids: Collection[int], reason: str) -> tuple[Correction, ...]:
    """Void results: they stay for audit, no longer count; one Correction per season, in
    season order. The boards are corrected by boards_correct (the caller queues it: a season
    board rebuild is not a request's work).

    A player with several results voided at once is one subject per board (one rank_changed:
    they moved once), named by their lowest result id voided there. Raises
    MatchResult.DoesNotExist when an id names no result, ValidationError for a blank reason or
    one PostgreSQL cannot store (nothing is voided then)."""
    reason = reason.strip()
    if not reason:
        raise ValidationError("a void needs a reason")
    if "\x00" in reason:
        # PostgreSQL text cannot hold it: refused here, not a DataError at the UPDATE.
        raise ValidationError("a void reason cannot contain a NUL character")
    wanted = set(result_ids)
    corrections: list[Correction] = []
    with transaction.atomic():
        results = list(MatchResult.objects.select_for_update().filter(pk__in=wanted).order_by("pk"))
        missing = wanted - {result.pk for result in results}
        if missing:
            raise MatchResult.DoesNotExist(f"no match result with id(s) {sorted(missing)}")
        now = timezone.now()
        by_season: dict[int, list[MatchResult]] = {}
        for result in results:
            by_season.setdefault(result.season_id, []).append(result)
        for season_id, season_results in sorted(by_season.items()):
            _season_corrections_lock(season_id=season_id)
            fresh = [result for result in season_results if result.voided_at is None]
            if fresh:
                MatchResult.objects.filter(pk__in=[result.pk for result in fresh]).update(
                    voided_at=now, void_reason=reason[:500]
                )
            first: dict[tuple[int, int], MatchResult] = {}
            for result in fresh:  # in id order: the first kept is the lowest id
                first.setdefault((result.board_id, result.player_id), result)
            subjects = tuple(
                CorrectionSubject(
                    player_id=result.player_id,
                    cause=f"void:{result.pk}",
                    at=now,
                    match_id=str(result.match_id),
                    board_id=result.board_id,
                )
                for result in first.values()
            )
            board_ids = tuple(sorted({result.board_id for result in season_results}))
            _standings_before_keep(season_id=season_id, board_ids=board_ids, subjects=subjects)
            corrections.append(
                Correction(
                    season_id,
                    tuple(sorted({r.achieved_at.astimezone(UTC).date() for r in season_results})),
                    bool(fresh),
                    board_ids,
                    subjects,
                    voided=len(fresh),
                )
            )
    return tuple(corrections)


def player_ban(
    *, season_id: int, player_id: int, reason: str, created_by_id: int | None = None
) -> Correction:
    """Ban a player from a season: none of their results count. Boards: see boards_correct."""
    reason = reason.strip()
    if not reason:
        raise ValidationError("a ban needs a reason")
    if player_id <= 0:
        raise ValidationError(f"player ids are positive integers, got {player_id}")
    with transaction.atomic():
        _season_corrections_lock(season_id=season_id)
        ban, created = PlayerBan.objects.get_or_create(
            season_id=season_id,
            player_id=player_id,
            defaults={"reason": reason[:500], "created_by_id": created_by_id},
        )
        subjects = (
            (CorrectionSubject(player_id=player_id, cause=f"ban:{ban.pk}", at=ban.created_at),)
            if created
            else ()
        )
        _standings_before_keep(season_id=season_id, board_ids=None, subjects=subjects)
    days = _player_days(season_id=season_id, player_id=player_id)
    return Correction(season_id, days, created, None, subjects)


def player_unban(*, season_id: int, player_id: int) -> Correction:
    now = timezone.now()
    with transaction.atomic():
        _season_corrections_lock(season_id=season_id)
        deleted, _ = PlayerBan.objects.filter(season_id=season_id, player_id=player_id).delete()
        subjects = (
            (
                CorrectionSubject(
                    player_id=player_id,
                    cause=f"unban:{season_id}:{player_id}:{int(now.timestamp())}",
                    at=now,
                ),
            )
            if deleted
            else ()
        )
        _standings_before_keep(season_id=season_id, board_ids=None, subjects=subjects)
    days = _player_days(season_id=season_id, player_id=player_id)
    return Correction(season_id, days, bool(deleted), None, subjects)


def _player_days(*, season_id: int, player_id: int) -> tuple[date, ...]:
    with connection.cursor() as cursor:
        # Through match_result_board_player_idx: one descent per board of the season.
        cursor.execute(
            f"SELECT DISTINCT (achieved_at AT TIME ZONE 'UTC')::date FROM {_RESULTS}"  # noqa: S608
            f" WHERE board_id IN (SELECT id FROM {_BOARDS} WHERE season_id = %s)"
            " AND player_id = %s ORDER BY 1",
            [season_id, player_id],
        )
        return tuple(row[0] for row in cursor.fetchall())
