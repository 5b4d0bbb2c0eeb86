"""Redis losing boards: noticed within seconds, rebuilt from PostgreSQL, exactly-once kept.

Every board Redis must hold (``board_list_open``) has an *intact* key in its slot
(``keys.board_intact``), set once the board is known to be whole. Loss shows first as:

- the intact key gone (a FLUSHALL, a restart without persistence, a failover to an empty or
  lagging replica, keys deleted by hand): Redis loses it with the board's other keys;
- the board's applied-offset watermark gone while the intact key is there (a partial loss);
- a new Redis run id (``INFO server``) since last seen: Redis restarted, perhaps from an AOF
  that lacks its last second. Nothing is missing then, only stale, the watermark included:
  every live board is compared with every stored result (services/reconcile.py, in full up to
  RECONCILE_FULL_MAX_MEMBERS players; a larger board compares its sample and every player
  ingested since shortly before the last check that saw the old run id, a heartbeat kept with
  it), and a board that differs is recovered like a lost one.

``boards_recover`` runs these checks (two EXISTS per board in one round trip, one INFO) at
consumer start-up, every few seconds from Celery beat, and repairs what they find at once.
Reads of a board without its intact key answer 503 (leaderboard/lua/board_*.lua).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from redis.exceptions import LockError
from redis.lock import Lock

from leaderboard import keys
from leaderboard.player_names import player_names_recover
from leaderboard.redis import board_redis_run_ids, get_board_redis
from leaderboard.scripts import ScriptCall, get_script, scripts_pipelined
from leaderboard.selectors.boards import BoardRef, board_list_open
from leaderboard.selectors.offsets import board_stored_offsets

from .corrections import daily_boards_existing
from .derived import weekly_boards_rebuild
from .rebuild import RebuildInProgressError, SeasonClosedError, board_rebuild
from .reconcile import (
    ReconcileResult,
    board_days_in_window,
    board_reconcile,
    reconcile_runs_mark_rebuilt,
    watermark_raise,
)

logger = logging.getLogger(__name__)

# A recovery that crashed holds its lock at most this long. Longer than the recovery task's hard
# time limit (leaderboard/tasks.py, 1,900 s), so a running one keeps it: a shorter lock let the
# next tick start the same recovery beside a long one.
RECOVERY_LOCK_SECONDS = 2_000
# After a restart, players ingested since this long before the last check that saw the old
# Redis are compared: the writes an AOF ``everysec`` loses are the last second or two before
# the crash, applied at most a few seconds after their PostgreSQL commit (ingested_at), and
# consumer clocks may differ from this one's by a little.
RESTART_LOOKBACK_SECONDS = 60


@dataclass(frozen=True, slots=True)
class BoardRecovered:
    board_id: int
    reason: str
    days: tuple[date, ...]  # daily boards rebuilt
    weeks: tuple[tuple[int, int], ...]  # weekly boards rebuilt (ISO year, week)
    seconds: float


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    checked: int  # boards looked at
    recovered: tuple[BoardRecovered, ...]
    busy: tuple[int, ...]  # lost boards another process is recovering (or rebuilding) now
    redis_restarted: bool  # a new run id: every board was reconciled in full
    reconciled: tuple[ReconcileResult, ...]
    # Profiles written into the name cache from PostgreSQL (None: the cache was whole).
    names_rebuilt: int | None = None

    def describe(self) -> str:
        text = f"{self.checked} board(s) checked, {len(self.recovered)} recovered"
        if self.busy:
            text += f", {len(self.busy)} being recovered elsewhere"
        if self.redis_restarted:
            drifted = sum(1 for r in self.reconciled if r.drift_found)
            text += f"; Redis restarted: {len(self.reconciled)} reconciled, {drifted} drifted"
        if self.names_rebuilt is not None:
            text += f"; name cache rebuilt ({self.names_rebuilt} profile(s))"
        return text


def _seen_parse(raw: Any) -> tuple[str | None, datetime | None]:
    """The run id last seen, and when (``"<run ids> <unix time>"``; a bare run id from before
    the heartbeat was kept has no time)."""
    if raw is None:
        return None, None
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    run_id, _, stamp = text.partition(" ")
    try:
        return run_id, datetime.fromtimestamp(float(stamp), tz=UTC)
    except ValueError:
        return run_id, None


def boards_lost_get(*, boards: list[BoardRef], topic: str | None = None) -> dict[int, str]:
    """The boards Redis does not hold as truth: board id -> why (intact key or watermark gone).

    ``topic``: whose watermark (default the configured match-results topic)."""
    topic = topic or settings.KAFKA_MATCH_RESULTS_TOPIC
    if not boards:
        return {}
    pipe = get_board_redis().pipeline(transaction=False)
    for board in boards:
        pipe.exists(keys.board_intact(board_id=board.id))
        pipe.exists(keys.ingest_applied_offsets(board_id=board.id, topic=topic))
    replies = pipe.execute()
    lost: dict[int, str] = {}
    for n, board in enumerate(boards):
        intact, watermark = replies[2 * n], replies[2 * n + 1]
        if not intact:
            lost[board.id] = "intact key missing"
        elif not watermark:
            lost[board.id] = "watermark missing"
    return lost


def boards_unchecked_get(*, boards: list[BoardRef], restarted: bool) -> set[int]:
    """The boards this Redis server process has not compared with PostgreSQL since it started
    (a restart or a failover, which may have lost the last writes): their checked key is
    missing, or stamped with another process's run id (a copy of memory brought it back: an
    AOF rewrite, a snapshot, a replica's full resync), which is deleted so their reads answer
    503 from now on. ``restarted``: the run id changed since the last look, so a checked key of
    the older form, without a run id, is not trusted either (otherwise it is stamped)."""
    if not boards:
        return set()
    client = get_board_redis()
    verify = get_script(client, "board_checked_verify")
    replies = scripts_pipelined(
        client,
        [
            ScriptCall(
                script=verify,
                keys=[keys.board_checked(board_id=board.id)],
                args=["0" if restarted else "1"],
            )
            for board in boards
        ],
    )
    return {board.id for board, checked in zip(boards, replies, strict=True) if not int(checked)}


def board_mark_intact(*, board_id: int) -> None:
    """Redis holds the board as PostgreSQL has it: set its intact key and, on this Redis
    process only, its checked key (``board_mark_checked.lua``)."""
    client = get_board_redis()
    client.set(keys.board_intact(board_id=board_id), "1")
    board_mark_checked(board_id=board_id)


def board_mark_checked(*, board_id: int) -> None:
    get_script(get_board_redis(), "board_mark_checked")(
        keys=[keys.board_checked(board_id=board_id)], args=[]
    )


def _board_recovered_mark(*, board_id: int, lock: Lock) -> bool:
    """``board_mark_intact`` if ``lock`` is still this run's (``board_recovered_mark.lua``)."""
    token = lock.local.token
    assert token is not None
    marked = get_script(get_board_redis(), "board_recovered_mark")(
        keys=[
            keys.board_recovering(board_id=board_id),
            keys.board_intact(board_id=board_id),
            keys.board_checked(board_id=board_id),
        ],
        args=[token],
    )
    return bool(int(marked))


def _lock(client: Any, name: str) -> Lock:
    """A recovery's lock: taken without waiting, released only by its holder (redis-py's token
    lock): a run that outlived its lock does not free the one the next run took meanwhile."""
    return client.lock(name, timeout=RECOVERY_LOCK_SECONDS, blocking=False)


def _release(lock: Lock) -> None:
    try:
        lock.release()
    except LockError:
        logger.warning("recovery lock %s expired before its run ended", lock.name)


def boards_recovering_get(*, boards: list[BoardRef]) -> set[int]:
    """The boards a recovery is rebuilding now (their lock is held)."""
    if not boards:
        return set()
    pipe = get_board_redis().pipeline(transaction=False)
    for board in boards:
        pipe.exists(keys.board_recovering(board_id=board.id))
    return {board.id for board, held in zip(boards, pipe.execute(), strict=True) if held}


def board_recover(
    *, board: BoardRef, reason: str, now: datetime, topic: str | None = None
) -> BoardRecovered | None:
    """Raise the board's watermark, rebuild everything Redis must hold of ``board`` from
    PostgreSQL, then mark it intact. None when another process holds the board's recovery or
    a rebuild, or when this run's lock went before its end (``board_recovered_mark.lua``: the
    board stays unmarked, for the next look).

    The watermark first: to the highest offset per partition of the board's stored results,
    read *before* any rebuild takes its snapshot, so every result it covers is in every
    snapshot, and a batch stored before the loss but applied after it is not counted twice
    (docs/ingestion.md, "Redis losing data"). Then the season-long board; every daily board
    within its expiry with counted results (and any daily board in Redis now: live ingestion
    may have re-created one); the weekly boards of those days' weeks, from the rebuilt daily
    boards.
    """
    client = get_board_redis()
    lock = _lock(client, keys.board_recovering(board_id=board.id))
    if not lock.acquire():
        return None
    started = time.monotonic()
    try:
        watermark_raise(board_id=board.id, offsets=board_stored_offsets(board=board), topic=topic)
        label = f"recovery: {reason}"
        board_rebuild(board_id=board.id, reason=label)
        days = sorted(
            set(board_days_in_window(board=board, now=now))
            | set(daily_boards_existing(board_id=board.id))
        )
        for day in days:
            board_rebuild(board_id=board.id, day=day, reason=label)
        today = now.date()
        weeks = sorted(
            {d.isocalendar()[:2] for d in days if d <= today},
        )
        weeks = weekly_boards_rebuild(board=board, weeks=weeks, now=now)
        if not _board_recovered_mark(board_id=board.id, lock=lock):
            logger.warning(
                "board %s: its recovery lock went during the run (the board's keys lost again, "
                "or the lock expired): not marked intact, recovered again at the next look",
                board.id,
            )
            return None
    except RebuildInProgressError:
        logger.info("recovery of board %s waits for a rebuild in progress", board.id)
        return None
    except SeasonClosedError:
        # Closed since the boards were listed: its keys went with the close-out, for good.
        return None
    finally:
        _release(lock)
    recovered = BoardRecovered(
        board_id=board.id,
        reason=reason,
        days=tuple(days),
        weeks=tuple((int(y), int(w)) for y, w in weeks),
        seconds=time.monotonic() - started,
    )
    logger.warning(
        "recovered board %s (%s): season-long, %d daily and %d weekly board(s) in %.1f s",
        board.id,
        reason,
        len(recovered.days),
        len(recovered.weeks),
        recovered.seconds,
    )
    return recovered


def _boards_check(
    *, boards: list[BoardRef], now: datetime, topic: str | None, recent_since: datetime | None
) -> tuple[list[ReconcileResult], list[BoardRecovered], bool]:
    """Boards this Redis process has not checked (a restart or a failover): compare each
    (season-long and every daily board in its window) with every stored result, mark it
    checked if it agrees, and recover it in full if it differs.

    Held to every stored result, not to the watermark: a restart from an AOF short of its last
    second lost the watermark's last moves together with the writes they covered, so the lost
    results lie above the watermark, where the routine reconcile does not look. A difference
    may also be a batch stored and not yet applied; either way the repair is the recovery's
    (raise the watermark to the stored offsets, then rebuild every key it covers), which keeps
    both exactly once, where a rebuild of the differing key alone could not.

    Returns (the comparisons, the boards recovered, whether every board was checked and every
    differing one recovered).
    """
    results: list[ReconcileResult] = []
    recovered: list[BoardRecovered] = []
    complete = True
    for board in boards:
        try:
            checks = [
                board_reconcile(
                    board_id=board.id,
                    day=day,
                    topic=topic,
                    recent_since=recent_since,
                    repair=False,
                    held_to="stored",
                )
                for day in (None, *board_days_in_window(board=board, now=now))
            ]
        except SeasonClosedError:
            continue  # closed since the boards were listed: nothing of it is served from Redis
        drifted = [c.run_id for c in checks if c.drift_found and c.run_id is not None]
        if any(c.run_id is None for c in checks):
            complete = False  # a rebuild of it is running: look again at the next run
        elif not drifted:
            board_mark_checked(board_id=board.id)
        else:
            reason = "Redis restarted or failed over: board differs from PostgreSQL"
            done = board_recover(board=board, reason=reason, now=now, topic=topic)
            if done is None:
                complete = False
            else:
                recovered.append(done)
                reconcile_runs_mark_rebuilt(run_ids=drifted)
                checks = [replace(c, rebuilt=c.drift_found) for c in checks]
        results += checks
    return results, recovered, complete


def boards_recover(*, now: datetime | None = None, topic: str | None = None) -> RecoveryReport:
    """Find the boards Redis lost or may hold stale, and repair them now (module docstring).

    ``topic``: whose watermarks (default the configured match-results topic; a consumer passes
    its own).
    """
    now = now or timezone.now()
    client = get_board_redis()
    boards = board_list_open()
    lost = boards_lost_get(boards=boards, topic=topic)
    recovered: list[BoardRecovered] = []
    busy: list[int] = []
    for board in boards:
        if board.id not in lost:
            continue
        result = board_recover(board=board, reason=lost[board.id], now=now, topic=topic)
        if result is None:
            busy.append(board.id)
        else:
            recovered.append(result)

    run_id = board_redis_run_ids()
    seen, seen_at = _seen_parse(client.get(keys.redis_run_id_seen()))
    restarted = seen != run_id
    not_checked = boards_unchecked_get(
        boards=[b for b in boards if b.id not in lost], restarted=restarted
    )
    unchecked = [board for board in boards if board.id in not_checked]
    heartbeat = f"{run_id} {time.time():.3f}"  # wall time: compared with ingested_at
    reconciled: list[ReconcileResult] = []
    complete = True
    lock = _lock(client, keys.redis_restart_check_lock())
    if unchecked:
        complete = False
        if lock.acquire():
            try:
                # On a large board, the players ingested shortly before the last look at the
                # old Redis are where lost last writes are (compared beside the sample).
                since = None
                if restarted and seen_at is not None:
                    since = seen_at - timedelta(seconds=RESTART_LOOKBACK_SECONDS)
                logger.warning(
                    "%d board(s) not checked on this Redis (run id %s, last seen %s at %s): "
                    "comparing them with PostgreSQL",
                    len(unchecked),
                    run_id,
                    seen,
                    seen_at.isoformat() if seen_at else "-",
                )
                reconciled, repaired, complete = _boards_check(
                    boards=unchecked, now=now, topic=topic, recent_since=since
                )
                recovered += repaired
            finally:
                _release(lock)
    # The name cache (leaderboard/player_names.py): refilled from PostgreSQL when Redis lost
    # it or restarted, after the boards, which reads wait on.
    names_rebuilt = player_names_recover(redis_restarted=restarted)
    # The heartbeat moves on once every board is checked: until then the next run compares
    # the rest against the same moment.
    if complete:
        client.set(keys.redis_run_id_seen(), heartbeat)
    return RecoveryReport(
        checked=len(boards),
        recovered=tuple(recovered),
        busy=tuple(busy),
        redis_restarted=restarted,
        reconciled=tuple(reconciled),
        names_rebuilt=names_rebuilt,
    )
