"""The close-out of a season: drain, final standings, grants, then its Redis keys dropped."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone
from kafka.errors import KafkaError

from leaderboard.models import Board
from leaderboard.rank_events import RankEventsNotDelivered
from leaderboard.selectors.boards import BoardRef, board_list
from leaderboard.selectors.leagues import league_previous_open
from leaderboard.services import (
    league_boards_open,
    season_corrections_events_relay,
    season_keys_unlink,
)
from seasons.models import Season, SeasonStatus
from seasons.services import season_keys_released

from ..models import FinalStanding, RewardGrant, RewardTier
from ..selectors import (
    StandingRow,
    board_standings_compute,
    consumer_group_lag_get,
    kafka_offsets_reader,
    topic_end_offsets_get,
)
from .final_events import season_final_events_publish
from .leagues import board_movements_decide, league_grants_create

logger = logging.getLogger(__name__)


# --- Close-out -----------------------------------------------------------------------------------


class CloseOutcome(StrEnum):
    CLOSED = "closed"
    ALREADY_CLOSED = "already_closed"
    DRAINING = "draining"  # within the grace after the switch to closing
    LAGGING = "lagging"  # the consumer has not drained the topic within the drain timeout
    # A league board of the season still waits for the previous season of its league to close:
    # that close-out decides who plays in which tier here (docs/leagues.md).
    LEAGUE_WAITING = "league_waiting"
    IN_PROGRESS = "in_progress"
    # Staff reopened the season while its close-out waited (grace, drain): nothing was closed,
    # granted or deleted, and the reopening stands.
    REOPENED = "reopened"


@dataclass(frozen=True)
class SeasonCloseResult:
    season_id: int
    outcome: CloseOutcome
    standings: int = 0
    grants_created: int = 0
    keys_unlinked: int = 0
    drain_until: datetime | None = None
    lagging: str = ""  # what the consumer has not drained yet (LAGGING)
    waiting_for_season: int | None = None  # the league's previous season (LEAGUE_WAITING)
    status: str = ""  # the season's status found (REOPENED)

    @property
    def closed(self) -> bool:
        """Whether the season is closed now, by this run or an earlier one."""
        return self.outcome in (CloseOutcome.CLOSED, CloseOutcome.ALREADY_CLOSED)

    def describe(self) -> str:
        if self.outcome == CloseOutcome.LAGGING:
            return (
                f"season {self.season_id} is closing but NOT finalized: {self.lagging}. "
                "Nothing was copied or granted; the periodic close-out tries again (or run "
                "close_season again; --force finalizes without the queued results)"
            )
        if self.outcome == CloseOutcome.LEAGUE_WAITING:
            return (
                f"season {self.season_id} is closing but NOT finalized: its league boards wait "
                f"for season {self.waiting_for_season}, the previous season of their league, to "
                "be closed (its close-out decides every player's tier here). The periodic "
                "close-out tries again"
            )
        if self.outcome == CloseOutcome.DRAINING:
            assert self.drain_until is not None
            return (
                f"season {self.season_id} is closing: it takes no more results, and its "
                f"close-out finishes after the consumer drained, at "
                f"{self.drain_until.isoformat()} (the periodic close-out task picks it up)"
            )
        if self.outcome == CloseOutcome.IN_PROGRESS:
            return f"season {self.season_id}: another close-out of it is running; nothing done here"
        if self.outcome == CloseOutcome.REOPENED:
            return (
                f"season {self.season_id} is {self.status} again (reopened while its close-out "
                "waited): nothing was closed, granted or deleted"
            )
        if self.outcome == CloseOutcome.ALREADY_CLOSED:
            return (
                f"season {self.season_id} was already closed: nothing granted; "
                f"{self.keys_unlinked} leftover Redis keys unlinked"
            )
        return (
            f"season {self.season_id} closed: {self.standings} final standings, "
            f"{self.grants_created} reward grants, {self.keys_unlinked} Redis keys unlinked"
        )


def season_close(
    *,
    season_id: int,
    now: datetime | None = None,
    grace_seconds: int | None = None,
    drain_timeout_seconds: float | None = None,
    force: bool = False,
    on_drain_progress: Callable[[str], None] | None = None,
    start_closing: bool = True,
) -> SeasonCloseResult:
    """Close a season out; safe to run any number of times, and to resume after a crash.

    ``start_closing``: a season that is neither closing nor closed is switched to closing (staff
    asking for its close-out). False (the periodic task, a waiting run looking again) leaves a
    season staff reopened meanwhile as it is: REOPENED, nothing done.

    1. Status "closing". Ingestion still takes results achieved inside the window (those queued
       in Kafka at the switch must count), and rejects only closed seasons.
    2. Let the consumer drain. (a) A short grace, ``grace_seconds`` (SEASON_CLOSE_GRACE_SECONDS)
       after the switch, for results game servers publish just after the end; until then the
       call returns DRAINING. (b) Then the match-results topic's end offsets are recorded once on
       the season (``drain_end_offsets``), and the call polls until the consumer group has
       committed up to them on every partition, for at most ``drain_timeout_seconds``
       (SEASON_CLOSE_DRAIN_TIMEOUT_SECONDS); otherwise it returns LAGGING naming the partitions
       and finalizes nothing. A rerun waits on the same recorded offsets. ``force`` skips both.
       ``on_drain_progress`` hears what still lags at every look while the drain is awaited.
    3. In ONE transaction, on one snapshot (REPEATABLE READ): the final top FINAL_STANDINGS_SIZE
       computed from PostgreSQL (the source a rebuild reads; Redis may have lost writes), a grant
       per player of each tier, status "closed". A crash before the commit leaves the season
       "closing": a rerun redoes it.
    4. The season_final rank events of each board (final_events.py; the sweep sends them if
       Kafka cannot take them now).
    5. UNLINK every Redis key of the season. A rerun on a closed season grants nothing (and the
       unique (season, player) constraint forbids a second grant) and only unlinks leftovers.
    """
    now = now or timezone.now()
    grace = settings.SEASON_CLOSE_GRACE_SECONDS if grace_seconds is None else grace_seconds
    if drain_timeout_seconds is None:
        drain_timeout_seconds = settings.SEASON_CLOSE_DRAIN_TIMEOUT_SECONDS
    in_progress = SeasonCloseResult(season_id=season_id, outcome=CloseOutcome.IN_PROGRESS)
    with transaction.atomic():
        # SKIP LOCKED: a close-out that finds another one running (a slow standings query, a
        # second sweep) returns at once instead of holding a worker until the first finishes.
        season = (
            Season.objects.select_for_update(no_key=True, skip_locked=True)
            .filter(id=season_id)
            .first()
        )
        if season is None:
            if Season.objects.filter(id=season_id).exists():
                return in_progress
            raise ValidationError(f"season {season_id} does not exist")
        already_closed = season.status == SeasonStatus.CLOSED
        if not already_closed and season.status != SeasonStatus.CLOSING:
            if not start_closing:
                return _reopened(season_id, season.status)
            season.status = SeasonStatus.CLOSING
            season.closing_since = now
            season.drain_end_offsets = None
            season.save(
                update_fields=["status", "closing_since", "drain_end_offsets", "updated_at"]
            )
            logger.info("season %s: closing (close-out asked for)", season.id)
    if not already_closed:
        drain_until = (season.closing_since or now) + timedelta(seconds=grace)
        if now < drain_until and not force:
            return SeasonCloseResult(
                season_id=season_id, outcome=CloseOutcome.DRAINING, drain_until=drain_until
            )
        if force:
            logger.warning(
                "season %s: close-out forced, without waiting for the consumer to drain", season_id
            )
        else:
            lagging = _season_drain_wait(
                season=season, timeout_seconds=drain_timeout_seconds, on_progress=on_drain_progress
            )
            if lagging:
                result = SeasonCloseResult(
                    season_id=season_id, outcome=CloseOutcome.LAGGING, lagging=lagging
                )
                logger.warning(result.describe())
                return result
        # A league board waiting for the previous season's close-out is opened first, when that
        # season has closed meanwhile; one still waiting holds the close-out back.
        league_boards_open(season_id=season_id)
        try:
            finalized = _season_finalize(season_id=season_id, now=now)
        except _LeagueWaiting as waiting:
            result = SeasonCloseResult(
                season_id=season_id,
                outcome=CloseOutcome.LEAGUE_WAITING,
                waiting_for_season=waiting.season_id,
            )
            logger.warning(result.describe())
            return result
        except _NotClosing as reopened:
            # Reopened during the grace or the drain: its boards are live, not leftovers.
            return _reopened(season_id, reopened.status)
        if finalized is None:
            return in_progress
        standings, grants_created = finalized
        if standings is None:  # someone else finalized it between our two transactions
            already_closed = True
        else:
            # The movements just committed decide the tiers of the league's next season: its
            # boards waiting for them form their cohorts now (the sweep does it after a crash).
            league_boards_open()
    if not already_closed:
        _season_final_events(season_id=season_id)
    keys_unlinked = 0
    try:
        # A correction's rank_changed events Kafka did not take are in the keys about to go.
        season_corrections_events_relay(season_id=season_id)
    except RankEventsNotDelivered:
        logger.warning(
            "season %s: correction events not sent (Kafka unavailable): its Redis keys stay "
            "until the sweep's next close-out sends them",
            season_id,
            exc_info=True,
        )
    else:
        keys_unlinked = season_keys_unlink(season_id=season_id)
        # Recorded once unlinked: a close-out stopped before this (a worker killed after the
        # commit) leaves the season to the sweep, which runs it again (seasons_keys_unreleased).
        season_keys_released(season_id=season_id)
    if already_closed:
        return SeasonCloseResult(
            season_id=season_id, outcome=CloseOutcome.ALREADY_CLOSED, keys_unlinked=keys_unlinked
        )
    result = SeasonCloseResult(
        season_id=season_id,
        outcome=CloseOutcome.CLOSED,
        standings=standings or 0,
        grants_created=grants_created,
        keys_unlinked=keys_unlinked,
    )
    logger.info(result.describe())
    return result


def _season_final_events(*, season_id: int) -> None:
    """The season_final rank events, once the standings are committed; if Kafka cannot take
    them now, the close-out's sweep sends them (seasons_final_events_due)."""
    try:
        season_final_events_publish(season_id=season_id)
    except Exception:
        logger.exception("season %s: season_final events not sent; the sweep retries", season_id)


# How often a waiting close-out asks Kafka for the consumer group's committed offsets.
_DRAIN_POLL_SECONDS = 0.25


def _season_drain_end_offsets(*, season: Season) -> dict[str, object]:
    """The end offsets the drain waits for: recorded once per closing, then reused by reruns."""
    if season.drain_end_offsets is not None:
        return season.drain_end_offsets
    topic = settings.KAFKA_MATCH_RESULTS_TOPIC
    ends = topic_end_offsets_get(topic=topic)
    record: dict[str, object] = {
        "topic": topic,
        "recorded_at": timezone.now().isoformat(),
        "partitions": {str(p): offset for p, offset in sorted(ends.items())},
    }
    # Only the first close-out records them; a concurrent one uses what that one stored.
    Season.objects.filter(
        id=season.id, status=SeasonStatus.CLOSING, drain_end_offsets__isnull=True
    ).update(drain_end_offsets=record)
    stored = Season.objects.filter(id=season.id).values_list("drain_end_offsets", flat=True).get()
    logger.info("season %s: draining %s up to %s", season.id, topic, stored)
    return stored if stored is not None else record


def _season_drain_wait(
    *, season: Season, timeout_seconds: float, on_progress: Callable[[str], None] | None = None
) -> str:
    """Wait until the consumer drained the topic up to the recorded end offsets; "" once it
    has, else (at the timeout, or when Kafka cannot tell) what still lags, for humans.
    ``on_progress`` hears what lags at each look that finds something still lagging."""
    group = settings.KAFKA_CONSUMER_GROUP
    deadline = time.monotonic() + max(0.0, timeout_seconds)
    try:
        record = _season_drain_end_offsets(season=season)
        topic = str(record["topic"])
        raw_ends = record["partitions"]
        assert isinstance(raw_ends, dict)
        ends = {int(p): int(offset) for p, offset in raw_ends.items()}
        with kafka_offsets_reader(group_id=group) as reader:
            while True:
                lag = consumer_group_lag_get(reader=reader, topic=topic, end_offsets=ends)
                if not lag:
                    return ""
                if on_progress is not None:
                    on_progress(
                        f"consumer group {group} to drain topic {topic}: "
                        + ", ".join(partition.describe() for partition in lag)
                    )
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return (
                        f"consumer group {group} has not drained topic {topic} up to the end "
                        f"offsets recorded at {record['recorded_at']} within "
                        f"{timeout_seconds:g} s; lagging: "
                        + ", ".join(partition.describe() for partition in lag)
                    )
                time.sleep(min(_DRAIN_POLL_SECONDS, remaining))
    except KafkaError as exc:
        return f"Kafka cannot tell whether the consumer drained the results ({exc!r})"


# --- Waiting until a season is closed ------------------------------------------------------------


class CloseWaitingFor(StrEnum):
    GRACE = "grace"  # the fixed grace after the switch to closing
    DRAIN = "drain"  # the consumer group to commit up to the recorded end offsets
    OTHER_RUN = "other_run"  # another close-out holding the season (a sweep's task, staff)
    # The previous season of a league of this season to be closed (docs/leagues.md).
    PREVIOUS_SEASON = "previous_season"


@dataclass(frozen=True)
class SeasonCloseProgress:
    """What a close-out waiting for its season to be closed waits for, at one moment."""

    season_id: int
    waiting_for: CloseWaitingFor
    detail: str
    elapsed_seconds: float

    def describe(self) -> str:
        return (
            f"season {self.season_id}: still closing after {self.elapsed_seconds:.0f} s, "
            f"waiting for {self.detail}"
        )


@dataclass(frozen=True)
class SeasonCloseWait:
    """How a wait for a season to be closed ended: ``result`` is the last close-out run's."""

    result: SeasonCloseResult
    waited_seconds: float
    timeout_seconds: float

    @property
    def closed(self) -> bool:
        return self.result.closed


# A waiting close-out reports what it waits for at most this often (and whenever that changes),
# and looks again this often at a season in its grace or held by another close-out.
_WAIT_PROGRESS_SECONDS = 5.0
_WAIT_POLL_SECONDS = 1.0


class _ProgressReporter:
    """Passes progress on, one line per interval unless what is waited for changes."""

    def __init__(
        self,
        *,
        season_id: int,
        on_progress: Callable[[SeasonCloseProgress], None] | None,
        every_seconds: float,
        started: float,
    ) -> None:
        self._season_id = season_id
        self._on_progress = on_progress
        self._every = every_seconds
        self._started = started
        self._last: tuple[CloseWaitingFor, float] | None = None

    def __call__(self, waiting_for: CloseWaitingFor, detail: str) -> None:
        if self._on_progress is None:
            return
        now = time.monotonic()
        if self._last is not None:
            last_for, last_at = self._last
            if last_for == waiting_for and now - last_at < self._every:
                return
        self._last = (waiting_for, now)
        self._on_progress(
            SeasonCloseProgress(
                season_id=self._season_id,
                waiting_for=waiting_for,
                detail=detail,
                elapsed_seconds=now - self._started,
            )
        )


def season_close_wait(
    *,
    season_id: int,
    timeout_seconds: float | None = None,
    grace_seconds: int | None = None,
    force: bool = False,
    on_progress: Callable[[SeasonCloseProgress], None] | None = None,
    progress_every_seconds: float = _WAIT_PROGRESS_SECONDS,
) -> SeasonCloseWait:
    """Close the season out (``season_close``) and wait until it is closed, for at most
    ``timeout_seconds`` (default SEASON_CLOSE_DRAIN_TIMEOUT_SECONDS; 0: one run that waits for
    nothing, so the season may still be closing).

    It waits through the grace (looking again once it has passed), the drain (one run polls the
    consumer group's offsets until the time is up), and another close-out holding the season
    (looking again every second: that run may finalize it, or leave it lagging to this one).
    ``on_progress`` hears what it waits for, at most once per ``progress_every_seconds`` unless
    that changes. ``closed`` on the answer says whether the season got closed in time.
    """
    if timeout_seconds is None:
        timeout_seconds = settings.SEASON_CLOSE_DRAIN_TIMEOUT_SECONDS
    started = time.monotonic()
    deadline = started + max(0.0, timeout_seconds)
    report = _ProgressReporter(
        season_id=season_id,
        on_progress=on_progress,
        every_seconds=progress_every_seconds,
        started=started,
    )

    def drain_progress(detail: str) -> None:
        report(CloseWaitingFor.DRAIN, detail)

    first = True
    while True:
        result = season_close(
            season_id=season_id,
            grace_seconds=grace_seconds,
            drain_timeout_seconds=max(0.0, deadline - time.monotonic()),
            force=force,
            on_drain_progress=drain_progress,
            # Only the first look closes the season; a reopening while this waits stands.
            start_closing=first,
        )
        first = False
        remaining = deadline - time.monotonic()
        if result.closed or result.outcome == CloseOutcome.REOPENED or remaining <= 0:
            return SeasonCloseWait(
                result=result,
                waited_seconds=time.monotonic() - started,
                timeout_seconds=timeout_seconds,
            )
        pause = _WAIT_POLL_SECONDS
        if result.outcome == CloseOutcome.DRAINING:
            assert result.drain_until is not None
            report(
                CloseWaitingFor.GRACE,
                "the grace for results published just after the end, until "
                + result.drain_until.isoformat(),
            )
            until_drain = (result.drain_until - timezone.now()).total_seconds()
            pause = min(progress_every_seconds, until_drain)
        elif result.outcome == CloseOutcome.IN_PROGRESS:
            report(CloseWaitingFor.OTHER_RUN, "another close-out of it to finish")
        elif result.outcome == CloseOutcome.LEAGUE_WAITING:
            report(
                CloseWaitingFor.PREVIOUS_SEASON,
                f"season {result.waiting_for_season} (the previous season of its league) to be "
                "closed",
            )
        else:  # LAGGING before the time is up: Kafka could not tell; ask it again
            report(CloseWaitingFor.DRAIN, result.lagging)
            pause = progress_every_seconds
        time.sleep(max(0.0, min(pause, remaining)))


def final_standings_replace(*, board: BoardRef, rows: Sequence[StandingRow]) -> None:
    """Replace the board's final standings by ``rows``; runs in the caller's transaction."""
    FinalStanding.objects.filter(board_id=board.id).delete()
    FinalStanding.objects.bulk_create(
        FinalStanding(
            season_id=board.season_id,
            board_id=board.id,
            rank=row.rank,
            player_id=row.player_id,
            points=row.points,
            reached_at=row.reached_at,
            metadata=row.stored_metadata,
            tiebreakers=row.tiebreakers,
            attempts=row.attempts,
        )
        for row in rows
    )


def _board_finalize(*, board: BoardRef) -> tuple[int, int]:
    """Final standings and grants of one board (on a league board, its movements, and grants
    by rank within each cohort); (standings, grants created)."""
    rows = board_standings_compute(board=board, limit=settings.FINAL_STANDINGS_SIZE)
    final_standings_replace(board=board, rows=rows)
    if board.tiers:
        board_movements_decide(board=board)
        return len(rows), league_grants_create(board=board)
    tiers = list(RewardTier.objects.filter(board_id=board.id, league_tier="").order_by("rank_from"))
    for tier in tiers:
        if tier.rank_to > settings.FINAL_STANDINGS_SIZE:
            # Refused when the tier is made; possible if FINAL_STANDINGS_SIZE was lowered since.
            logger.warning(
                "board %s: reward tier %s-%s passes FINAL_STANDINGS_SIZE (%s); ranks past it "
                "get no grant",
                board.id,
                tier.rank_from,
                tier.rank_to,
                settings.FINAL_STANDINGS_SIZE,
            )
    already_granted = set(
        RewardGrant.objects.filter(board_id=board.id).values_list("player_id", flat=True)
    )
    grants = [
        RewardGrant(
            season_id=board.season_id,
            board_id=board.id,
            tier=tier,
            player_id=row.player_id,
            rank=row.rank,
            reward_name=tier.reward_name,
            quantity=tier.quantity,
        )
        for tier in tiers
        for row in rows[tier.rank_from - 1 : tier.rank_to]
        if row.player_id not in already_granted
    ]
    RewardGrant.objects.bulk_create(grants)
    return len(rows), len(grants)


class _LeagueWaiting(Exception):
    """A league board of the season waits for the previous season of its league to close."""

    def __init__(self, season_id: int | None) -> None:
        super().__init__(f"waiting for season {season_id}")
        self.season_id = season_id


class _NotClosing(Exception):
    def __init__(self, status: str) -> None:
        super().__init__(f"the season is {status}")
        self.status = status


def _reopened(season_id: int, status: str) -> SeasonCloseResult:
    result = SeasonCloseResult(season_id=season_id, outcome=CloseOutcome.REOPENED, status=status)
    logger.warning(result.describe())
    return result


@transaction.atomic
def _season_finalize(*, season_id: int, now: datetime) -> tuple[int | None, int] | None:
    """(standings, grants created) over every board; (None, 0) when closed meanwhile; None
    when locked (another close-out, or a batch storing results of the season right now: the
    rerun redoes it); _NotClosing when staff reopened it.

    The season is held FOR UPDATE to the commit, which conflicts with the FOR KEY SHARE a
    batch's store takes (leaderboard/services/results.py LOCK_BOARDS_SQL): no batch of the
    season is storing when the lock is had, none can commit a result of the season until the
    close-out has, and one waiting meanwhile reads the season closed and dead-letters its
    results (season_closed). So every statement here, each on its own READ COMMITTED snapshot,
    sees the same results of the season, all of them: a REPEATABLE READ snapshot, taken when the
    first statement began, missed the results of a batch that committed while that statement
    waited, and FOR NO KEY UPDATE let batches store results into the season closed.
    """
    season = Season.objects.select_for_update(skip_locked=True).filter(id=season_id).first()
    if season is None:
        return None
    if season.status == SeasonStatus.CLOSED:
        return None, 0
    if season.status != SeasonStatus.CLOSING:
        raise _NotClosing(season.status)
    waiting = Board.objects.filter(season_id=season_id, league_waiting=True).first()
    if waiting is not None:
        with connection.cursor() as cursor:
            previous = league_previous_open(
                cursor=cursor,
                schedule_id=season.schedule_id,
                occurrence=season.occurrence,
                slug=waiting.slug,
            )
        raise _LeagueWaiting(previous)
    standings = grants = 0
    for board in board_list(season_id=season_id):
        board_standings, board_grants = _board_finalize(board=board)
        standings += board_standings
        grants += board_grants
    season.status = SeasonStatus.CLOSED
    season.closed_at = now
    season.save(update_fields=["status", "closed_at", "updated_at"])
    return standings, grants
