"""Reconcile: compare a board with PostgreSQL and report what differs.

Boards up to ``RECONCILE_FULL_MAX_MEMBERS`` players are compared in full (every player's
score, PostgreSQL's aggregation streamed against a ZSCAN of Redis): a sample of 200 cannot
find the ~100 players of thousands that a lost last second of Redis's AOF leaves wrong.
Larger boards are compared by member count and a sample (docs/reliability.md).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Literal, cast

from django.conf import settings

from leaderboard import keys
from leaderboard.codec import CodecError
from leaderboard.models import ReconcileRun
from leaderboard.redis import BoardRedis, get_board_redis
from leaderboard.scripts import get_script
from leaderboard.selectors.boards import BoardRef, board_get, board_list_live
from leaderboard.selectors.days import board_days_last_ingested
from leaderboard.selectors.members import (
    MemberCounts,
    board_member_count,
    board_member_counts,
    board_players_ingested_since,
    board_players_sample,
    board_players_uncovered,
)
from leaderboard.selectors.scores import board_scores_chunks, board_scores_for_players
from seasons.selectors import SeasonRef

from .apply import daily_board_expire_at
from .derived import weekly_boards_rebuild
from .rebuild import (
    RebuildInProgressError,
    SeasonClosedError,
    _board_keys,
    board_rebuild,
    board_season_open_check,
)

logger = logging.getLogger(__name__)

DEFAULT_RECONCILE_SAMPLE = 200
# Kept on the run record for staff; the count of mismatches is always exact.
MISMATCH_EXAMPLES = 20
# A full comparison that finds more players differing than this does not look at each of
# them a second time: the board is rebuilt anyway.
RECHECK_MAX = 5000
# After a Redis restart, a board too large to compare in full has its recently ingested
# players compared as well as its sample: at most this many (a lost second at 100,000 results
# a second), in ZMSCORE calls of COMPARE_CHUNK players (short calls keep Redis responsive).
RECENT_PLAYERS_MAX = 200_000
COMPARE_CHUNK = 10_000


@dataclass(frozen=True, slots=True)
class ReconcileResult:
    board_id: int
    day: date | None
    # None when the board was being rebuilt and the comparison was skipped.
    run_id: int | None
    drift_found: bool
    rebuilt: bool
    full: bool = False  # every player compared, not a sample


# What Redis is held to: what the board's watermark covers (the routine reconcile), or every
# stored result (after a Redis restart, whose lost writes took the watermark's moves with them).
HeldTo = Literal["watermark", "stored"]


def _watermark(
    client: BoardRedis, *, board_id: int, topic: str, held_to: HeldTo
) -> dict[int, int] | None:
    """The board's applied-offset watermark: partition -> the highest offset on the board
    (None when Redis is held to every stored result)."""
    if held_to == "stored":
        return None
    raw = cast(
        dict[bytes, bytes],
        client.hgetall(keys.ingest_applied_offsets(board_id=board_id, topic=topic)),
    )
    return {int(field): int(value) for field, value in raw.items() if field.isdigit()}


@dataclass(frozen=True, slots=True)
class _Comparison:
    redis_members: int
    # The member count the watermark allows nearest to Redis's (docs/ingestion.md, "Reconcile").
    expected_members: int
    count_drift: bool
    mismatches: list[dict[str, int | str | None]]


def _compare(
    client: BoardRedis,
    *,
    board: BoardRef,
    day: date | None,
    key: str,
    players: list[int],
    topic: str,
    held_to: HeldTo,
) -> _Comparison:
    """Redis against what the board's watermark says Redis must hold.

    The watermark is read first: every result it covers was committed in PostgreSQL before it
    moved, so the expected scores below count all of them. A player with a result stored above
    it (stored, not yet applied; or counted already by a rebuild's snapshot) may legitimately
    differ, so is left out of the comparison; that is read after Redis, so a result applied
    while Redis was read is seen there.
    """
    applied = _watermark(client, board_id=board.id, topic=topic, held_to=held_to)
    redis_members = int(client.zcard(key))
    # A board with tie-break columns: its index (player -> wide key) must name every member.
    index_drift = (
        bool(board.tiebreaks) and int(client.hlen(keys.board_index(board_key=key))) != redis_members
    )
    expected = board_scores_for_players(board=board, player_ids=players, day=day, applied=applied)
    actual = _redis_values(client, board=board, key=key, players=players)
    mismatches: list[dict[str, int | str | None]] = []
    for player, have in zip(players, actual, strict=True):
        want = expected.get(player)
        if have != (None if want is None else want.score):
            mismatches.append(
                {"player_id": player, "redis": have, "expected": want.score if want else None}
            )
    if applied is None:
        stored = board_member_count(board=board, day=day)
        counts = MemberCounts(covered=stored, stored=stored)
        uncovered: set[int] = set()
    else:
        counts = board_member_counts(board=board, applied=applied, day=day)
        uncovered = board_players_uncovered(
            board=board,
            player_ids=[int(m["player_id"] or 0) for m in mismatches],
            applied=applied,
            day=day,
        )
    return _Comparison(
        redis_members=redis_members,
        expected_members=min(max(redis_members, counts.covered), counts.stored),
        count_drift=not counts.covered <= redis_members <= counts.stored or index_drift,
        mismatches=[m for m in mismatches if m["player_id"] not in uncovered],
    )


def _redis_values(
    client: BoardRedis, *, board: BoardRef, key: str, players: list[int]
) -> list[int | str | None]:
    """Each player's value on the board in Redis: the encoded score, or on a board with
    tie-break columns the wide key its index holds (None: not on the board)."""
    values: list[int | str | None] = []
    index = keys.board_index(board_key=key)
    for first in range(0, len(players), COMPARE_CHUNK):
        chunk = [str(p) for p in players[first : first + COMPARE_CHUNK]]
        if board.tiebreaks:
            found = cast(list[bytes | None], client.hmget(index, chunk))
            values += [None if v is None else v.decode() for v in found]
        else:
            values += [None if v is None else int(v) for v in client.zmscore(key, chunk)]
    return values


def _redis_scan(
    client: BoardRedis, *, board: BoardRef, key: str
) -> Iterator[tuple[int, int | str]]:
    """Every (player, value) of the board in Redis, as ``_redis_values`` reads them (a member
    may come twice while the set or the index is rehashed)."""
    if board.tiebreaks:
        for raw_player, raw_key in client.hscan_iter(keys.board_index(board_key=key), count=5000):
            yield int(raw_player), raw_key.decode()
        return
    for raw_member, score in client.zscan_iter(key, count=5000, score_cast_func=int):
        yield int(raw_member), score


def _differing_players(
    client: BoardRedis, *, board: BoardRef, day: date | None, key: str, topic: str, held_to: HeldTo
) -> list[int] | None:
    """Every player whose score may differ between PostgreSQL and Redis, in one pass over each
    (None when PostgreSQL holds a cumulative sum the codec cannot hold: the sample decides).
    The candidates are then compared again by ``_compare``, which leaves out the players whose
    results ingestion has not applied yet."""
    applied = _watermark(client, board_id=board.id, topic=topic, held_to=held_to)
    expected: dict[int, int | str] = {}
    try:
        for chunk in board_scores_chunks(board=board, day=day, applied=applied):
            for row in chunk:
                expected[row.player_id] = row.score
    except CodecError:
        return None
    differing: list[int] = []
    # ZSCAN may return a member twice (while the set is rehashed): the dict of seen members
    # keeps the comparison exact.
    seen: set[int] = set()
    for player, score in _redis_scan(client, board=board, key=key):
        if player in seen:
            continue
        seen.add(player)
        if expected.pop(player, None) != score:
            differing.append(player)
    differing += list(expected)  # in PostgreSQL, missing from Redis
    return differing


def _sampled_players(
    client: BoardRedis,
    *,
    board: BoardRef,
    day: date | None,
    key: str,
    size: int,
    recent_since: datetime | None,
) -> list[int]:
    """The players a board too large to compare in full is compared on: half the sample from
    PostgreSQL, half from Redis, and every player ingested since ``recent_since`` if given."""
    half = max(1, size // 2)
    players = set(board_players_sample(board=board, size=half, day=day))
    if board.tiebreaks:
        drawn = cast(list[bytes], client.hrandfield(keys.board_index(board_key=key), half) or [])
    else:
        drawn = cast(list[bytes], client.zrandmember(key, half) or [])
    players.update(int(m) for m in drawn)
    if recent_since is not None:
        recent = board_players_ingested_since(
            board=board, since=recent_since, day=day, limit=RECENT_PLAYERS_MAX
        )
        if len(recent) == RECENT_PLAYERS_MAX:
            logger.warning(
                "reconcile: board %s%s has more than %d players ingested since %s; "
                "comparing that many",
                board.id,
                "" if day is None else f" day {day}",
                RECENT_PLAYERS_MAX,
                recent_since.isoformat(),
            )
        players.update(recent)
    return sorted(players)


def board_reconcile(
    *,
    board_id: int,
    day: date | None = None,
    sample_size: int = DEFAULT_RECONCILE_SAMPLE,
    repair: bool = True,
    full_max_members: int | None = None,
    topic: str | None = None,
    recent_since: datetime | None = None,
    held_to: HeldTo = "watermark",
) -> ReconcileResult:
    """Compare a board in Redis with PostgreSQL; record the drift; rebuild the board if any.

    Up to ``full_max_members`` players (default RECONCILE_FULL_MAX_MEMBERS) every score is
    compared; above, a sample mixing players drawn from PostgreSQL (missing or wrong on the
    board) and from Redis (present but not counted, e.g. a voided result or a banned player).
    Redis is held to what the board's applied-offset watermark covers: a result stored but
    not yet applied is never drift (the consumer may apply it at any moment), and the repair
    rebuilds only the drifted key and never moves the watermark, which covers the season-long
    key and every daily key of the board at once (docs/ingestion.md, "Reconcile"). A drift is
    confirmed by a second look at the same players before it counts (a void or a ban landing
    between the two reads).

    Raises SeasonClosedError for a board of a closed season (its keys left Redis with the
    close-out).

    ``held_to="stored"`` (after a Redis restart, with ``repair=False``): Redis is held to every
    stored result, since a restart that lost writes lost the watermark's moves with them; a
    drift found then is the recovery's to repair, raising the watermark together with a rebuild
    of every key of the board (services/recovery.py). ``recent_since`` (idem): a board compared
    by sample also compares every player with a result ingested since then, whose last write
    the restart may have lost; a sample alone would find a lost second of writes on a large
    board only by luck.
    """
    board = board_get(board_id=board_id)
    # A closed season's boards left Redis: everything would look like drift.
    board_season_open_check(board=board)
    topic = topic or settings.KAFKA_MATCH_RESULTS_TOPIC
    client = get_board_redis()
    k = _board_keys(board_id=board_id, day=day)
    if client.exists(k.marker):
        return ReconcileResult(board_id, day, None, drift_found=False, rebuilt=False)
    limit = settings.RECONCILE_FULL_MAX_MEMBERS if full_max_members is None else full_max_members
    players: list[int] | None = None
    full = False
    if int(client.zcard(k.live)) <= limit and board_member_count(board=board, day=day) <= limit:
        players = _differing_players(
            client, board=board, day=day, key=k.live, topic=topic, held_to=held_to
        )
        full = players is not None
        if players is not None:
            players = players[:RECHECK_MAX]
    if players is None:
        players = _sampled_players(
            client, board=board, day=day, key=k.live, size=sample_size, recent_since=recent_since
        )
    sampled = len(players)

    def compare(players: list[int]) -> _Comparison:
        return _compare(
            client, board=board, day=day, key=k.live, players=players, topic=topic, held_to=held_to
        )

    found = compare(players)
    if found.mismatches or found.count_drift:
        found = compare([int(m["player_id"] or 0) for m in found.mismatches])
    drift = bool(found.mismatches) or found.count_drift
    run = ReconcileRun.objects.create(
        season_id=board.season_id,
        board_id=board_id,
        day=day,
        redis_members=found.redis_members,
        expected_members=found.expected_members,
        sample_size=found.redis_members if full else sampled,
        mismatched_scores=len(found.mismatches),
        mismatch_examples=found.mismatches[:MISMATCH_EXAMPLES],
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
        logger.warning(
            "reconcile: board %s%s drifted (%d vs %d players, %d scores differ); %s",
            board_id,
            "" if day is None else f" day {day}",
            found.redis_members,
            found.expected_members,
            len(found.mismatches),
            "rebuilt" if rebuilt else "not rebuilt",
        )
    return ReconcileResult(board_id, day, run.pk, drift_found=drift, rebuilt=rebuilt, full=full)


def watermark_raise(*, board_id: int, offsets: Mapping[int, int], topic: str | None = None) -> None:
    """Raise the board's applied-offset watermark of ``topic`` (default the configured one) to
    ``offsets`` (partition -> highest offset to cover), never lowering a field. The hash always
    gets a ``recovered`` field too, so that a hash that vanished later is a sign of loss
    (services/recovery.py)."""
    args: list[str | int] = ["recovered", 1]
    for partition, offset in sorted(offsets.items()):
        args += [str(partition), offset]
    get_script(get_board_redis(), "watermark_raise")(
        keys=[
            keys.ingest_applied_offsets(
                board_id=board_id, topic=topic or settings.KAFKA_MATCH_RESULTS_TOPIC
            )
        ],
        args=args,
    )


def reconcile_days(*, season: SeasonRef, today: date) -> list[date]:
    """The current ISO week's days within the season (what weekly boards are built from)."""
    first = max(season.starts_at.astimezone(UTC).date(), today - timedelta(days=today.weekday()))
    last = min(season.ends_at.astimezone(UTC).date(), today)
    return [first + timedelta(days=n) for n in range((last - first).days + 1)]


def board_days_in_window(*, board: BoardRef, now: datetime) -> list[date]:
    """The days whose daily board Redis must hold: each day with a counted result whose board
    has not expired. Ingestion sets a daily board to expire LEADERBOARD_DAILY_TTL_DAYS after its
    day ends or after its last write, whichever is later (``daily_board_expire_at``), so a day
    of last month that received a late result yesterday is still in Redis, and must be checked
    and rebuilt like today's (a Redis restart may have lost that late write)."""
    stamp = int(now.timestamp())
    return [
        day
        for day, last_ingested in board_days_last_ingested(board=board).items()
        if daily_board_expire_at(day=day, now=last_ingested) > stamp
    ]


def boards_reconcile_live_seasons(
    *,
    now: datetime,
    sample_size: int = DEFAULT_RECONCILE_SAMPLE,
    topic: str | None = None,
) -> list[ReconcileResult]:
    """Reconcile every live board: season-long, and every daily board within its expiry

    A board Redis lost entirely (no intact key) is the recovery's (services/recovery.py).
    """
    results: list[ReconcileResult] = []
    client = get_board_redis()
    # Closing seasons still move while the consumer drains their last results.
    for board in board_list_live():
        if not client.exists(keys.board_intact(board_id=board.id)):
            continue
        repaired: list[date] = []
        try:
            results.append(
                board_reconcile(
                    board_id=board.id,
                    sample_size=sample_size,
                    topic=topic,
                )
            )
            for day in board_days_in_window(board=board, now=now):
                result = board_reconcile(
                    board_id=board.id,
                    day=day,
                    sample_size=sample_size,
                    topic=topic,
                )
                results.append(result)
                if result.rebuilt:
                    repaired.append(day)
        except SeasonClosedError:
            # Closed while this ran (a closing season is live): its keys went with the close-out.
            continue
        # A weekly board is built from the daily boards: rebuild those built from a repaired one.
        weekly_boards_rebuild(
            board=board,
            weeks=[d.isocalendar()[:2] for d in repaired],
            now=now,
            only_existing=True,
        )
    return results


def reconcile_runs_mark_rebuilt(*, run_ids: list[int]) -> None:
    """Record that the boards of these runs were rebuilt by someone else (the recovery)."""
    ReconcileRun.objects.filter(pk__in=run_ids).update(rebuilt=True)
