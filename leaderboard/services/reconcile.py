"""Reconcile: compare a board with PostgreSQL and report what differs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import cast

from leaderboard.board_scores import (
    board_member_count,
    board_players_sample,
    board_scores_for_players,
)
from leaderboard.models import ReconcileRun
from leaderboard.redis import BoardRedis, get_board_redis
from leaderboard.selectors import BoardRef, board_get, board_list_live
from seasons.selectors import SeasonRef

from .rebuild import RebuildInProgressError, _board_keys, board_rebuild

DEFAULT_RECONCILE_SAMPLE = 200
# Kept on the run record for staff; the count of mismatches is always exact.
MISMATCH_EXAMPLES = 20


@dataclass(frozen=True, slots=True)
class ReconcileResult:
    board_id: int
    day: date | None
    # None when the board was being rebuilt and the comparison was skipped.
    run_id: int | None
    drift_found: bool
    rebuilt: bool


def _compare(
    client: BoardRedis, *, board: BoardRef, day: date | None, key: str, players: list[int]
) -> tuple[int, int, list[dict[str, int | None]]]:
    """(redis members, expected members, mismatching sampled players)."""
    redis_members = int(client.zcard(key))
    expected_members = board_member_count(board=board, day=day)
    if not players:
        return redis_members, expected_members, []
    expected = board_scores_for_players(board=board, player_ids=players, day=day)
    actual = client.zmscore(key, [str(p) for p in players])
    mismatches: list[dict[str, int | None]] = []
    for player, got in zip(players, actual, strict=True):
        want = expected.get(player)
        have = None if got is None else int(got)
        if have != (None if want is None else want.score):
            mismatches.append(
                {"player_id": player, "redis": have, "expected": want.score if want else None}
            )
    return redis_members, expected_members, mismatches


def board_reconcile(
    *,
    board_id: int,
    day: date | None = None,
    sample_size: int = DEFAULT_RECONCILE_SAMPLE,
    repair: bool = True,
) -> ReconcileResult:
    """Compare a board in Redis with PostgreSQL; record the drift; rebuild the board if any.

    The sample mixes players drawn from PostgreSQL (missing or wrong on the board) and from
    Redis (present but not counted, e.g. a voided result or a banned player). A result
    committed but not yet applied looks like drift for a moment, so a drift is confirmed by
    a second look at the same players before it counts.
    """
    board = board_get(board_id=board_id)
    client = get_board_redis()
    k = _board_keys(board_id=board_id, day=day)
    if client.exists(k.marker):
        return ReconcileResult(board_id, day, None, drift_found=False, rebuilt=False)
    half = max(1, sample_size // 2)
    from_pg = board_players_sample(board=board, size=half, day=day)
    raw_members = cast(list[bytes], client.zrandmember(k.live, half) or [])
    from_redis = [int(m) for m in raw_members]
    players = sorted(set(from_pg) | set(from_redis))

    redis_members, expected_members, mismatches = _compare(
        client, board=board, day=day, key=k.live, players=players
    )
    if mismatches or redis_members != expected_members:
        recheck = [int(m["player_id"] or 0) for m in mismatches]
        redis_members, expected_members, mismatches = _compare(
            client, board=board, day=day, key=k.live, players=recheck
        )
    drift = bool(mismatches) or redis_members != expected_members
    run = ReconcileRun.objects.create(
        season_id=board.season_id,
        board_id=board_id,
        day=day,
        redis_members=redis_members,
        expected_members=expected_members,
        sample_size=len(players),
        mismatched_scores=len(mismatches),
        mismatch_examples=mismatches[:MISMATCH_EXAMPLES],
        drift_found=drift,
    )
    rebuilt = False
    if drift and repair:
        try:
            board_rebuild(board_id=board_id, day=day, reason=f"reconcile #{run.pk}")
            rebuilt = True
        except RebuildInProgressError:
            rebuilt = False
        ReconcileRun.objects.filter(pk=run.pk).update(rebuilt=rebuilt)
    return ReconcileResult(board_id, day, run.pk, drift_found=drift, rebuilt=rebuilt)


def reconcile_days(*, season: SeasonRef, today: date) -> list[date]:
    """The daily boards a reconcile covers: the current ISO week's days within the season
    (what weekly boards are built from; older daily boards expire anyway)."""
    first = max(season.starts_at.astimezone(UTC).date(), today - timedelta(days=today.weekday()))
    last = min(season.ends_at.astimezone(UTC).date(), today)
    return [first + timedelta(days=n) for n in range((last - first).days + 1)]


def boards_reconcile_live_seasons(
    *, now: datetime, sample_size: int = DEFAULT_RECONCILE_SAMPLE
) -> list[ReconcileResult]:
    """Reconcile every live board, season-long and this week's daily boards."""
    results: list[ReconcileResult] = []
    # Closing seasons still move while the consumer drains their last results.
    for board in board_list_live():
        results.append(board_reconcile(board_id=board.id, sample_size=sample_size))
        for day in reconcile_days(season=board.season, today=now.astimezone(UTC).date()):
            results.append(board_reconcile(board_id=board.id, day=day, sample_size=sample_size))
    return results
