"""Creating boards, and seasons with their main board."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from functools import partial

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone
from redis.exceptions import RedisError

from seasons.leagues import NO_LEAGUE, LeagueSpec
from seasons.models import Season, SeasonStatus
from seasons.services import season_create

from ..codec import CodecError, ScoreCodec
from ..models import (
    COHORT_SIZE_MAX,
    COHORT_SIZE_MIN,
    EVENT_TOP_N_DEFAULT,
    EVENT_TOP_N_MAX,
    MAIN_BOARD,
    MAX_ATTEMPTS_MAX,
    MAX_SIZE_MAX,
    Board,
    BoardOrder,
    ScoringRule,
    TiebreakColumn,
    TiebreakSpecError,
    tiebreak_columns_check,
)
from ..selectors.leagues import league_previous_open
from .reconcile import watermark_raise
from .recovery import board_mark_intact

logger = logging.getLogger(__name__)


@transaction.atomic
def board_create(
    *,
    season_id: int,
    slug: str,
    name: str,
    order: str = BoardOrder.DESC,
    rule: str = ScoringRule.BEST,
    time_resolution_seconds: int = 1,
    keeps_metadata: bool = False,
    tiebreaks: Sequence[TiebreakColumn] = (),
    cohort_size: int | None = None,
    rank_events: bool = True,
    event_top_n: int = EVENT_TOP_N_DEFAULT,
    league: LeagueSpec = NO_LEAGUE,
    join_required: bool = False,
    max_size: int | None = None,
    max_attempts: int | None = None,
) -> Board:
    """Add a board to a season; its codec split is fixed now from the season's length and the
    time resolution, and never changes once the board has results (nor do ``keeps_metadata``,
    since the results stored before would have none, and ``tiebreaks``, the columns ranked after
    points: every stored key depends on them; nor ``cohort_size``, which every cohort was
    filled to).

    ``league``: the board is a league board (its schedule's tiers, docs/leagues.md), which needs
    cohorts; it waits for the close-out of the league's previous season when that season is not
    closed yet (services/leagues.py).

    ``join_required``, ``max_size``, ``max_attempts``: a tournament (docs/tournaments.md)."""
    season = Season.objects.select_for_update(no_key=True).filter(id=season_id).first()
    if season is None:
        raise ValidationError(f"season {season_id} does not exist")
    if season.status == SeasonStatus.CLOSED:
        raise ValidationError(f"season {season_id} is closed: it takes no new board")
    if order not in BoardOrder.values:
        raise ValidationError(f"order must be one of {', '.join(BoardOrder.values)}, got {order!r}")
    if rule not in ScoringRule.values:
        raise ValidationError(f"rule must be one of {', '.join(ScoringRule.values)}, got {rule!r}")
    if Board.objects.filter(season_id=season_id, slug=slug).exists():
        raise ValidationError(f"season {season_id} already has a board {slug!r}")
    try:
        codec = ScoreCodec.for_window(
            duration=season.ends_at - season.starts_at,
            resolution_seconds=time_resolution_seconds,
        )
    except CodecError as exc:
        raise ValidationError(str(exc)) from exc
    board = Board(
        season=season,
        slug=slug,
        name=name,
        order=order,
        rule=rule,
        time_resolution_seconds=time_resolution_seconds,
        time_bits=codec.time_bits,
        keeps_metadata=keeps_metadata,
        tiebreak_columns=tiebreak_columns_json(tiebreaks),
        cohort_size=cohort_size_check(cohort_size),
        rank_events=rank_events,
        event_top_n=event_top_n_check(event_top_n),
        tiers=list(league.tiers),
        promote_percent=league.promote_percent,
        relegate_percent=league.relegate_percent,
        **tournament_options_check(
            join_required=join_required, max_size=max_size, max_attempts=max_attempts
        ),
    )
    if league.is_league:
        if cohort_size is None:
            raise ValidationError(f"board {slug!r}: a league ranks its players in cohorts")
        with connection.cursor() as cursor:
            board.league_waiting = (
                league_previous_open(
                    cursor=cursor,
                    schedule_id=season.schedule_id,
                    occurrence=season.occurrence,
                    slug=slug,
                )
                is not None
            )
    board.full_clean()
    board.save(force_insert=True)
    transaction.on_commit(partial(_new_board_mark_intact, board_id=board.id))
    return board


def _new_board_mark_intact(*, board_id: int) -> None:
    """A new board is whole as it is (empty): mark it intact, with its watermark hash, so its
    reads answer at once instead of 503 until the recovery task's next run, and the recovery
    does not rebuild it (services/recovery.py)."""
    try:
        watermark_raise(board_id=board_id, offsets={})
        board_mark_intact(board_id=board_id)
    except RedisError:
        logger.warning("board %s: Redis unavailable; the recovery task marks it intact", board_id)


# What a board's encoded scores (and its stored results) depend on: fixed once it has results.
SCORE_FIELDS = (
    "slug",
    "order",
    "rule",
    "time_resolution_seconds",
    "keeps_metadata",
    "tiebreak_columns",
    "cohort_size",
)
# The rank events options (docs/events.md): free to change at any time.
EVENT_FIELDS = ("rank_events", "event_top_n")
# The tournament options (docs/tournaments.md): free to change at any time too; ingestion reads
# them in each batch's transaction, and what it refused before stays refused.
TOURNAMENT_FIELDS = ("join_required", "max_size", "max_attempts")


def tournament_options_check(
    *, join_required: bool, max_size: int | None, max_attempts: int | None
) -> dict[str, bool | int | None]:
    """A board's tournament options, checked: seats only on a board players join, each limit
    positive and sensible."""
    if max_size is not None:
        if not 1 <= max_size <= MAX_SIZE_MAX:
            raise ValidationError(f"max size must be 1 to {MAX_SIZE_MAX}, got {max_size}")
        if not join_required:
            raise ValidationError(
                "max size needs join required: the seats are taken by joining the board"
            )
    if max_attempts is not None and not 1 <= max_attempts <= MAX_ATTEMPTS_MAX:
        raise ValidationError(f"max attempts must be 1 to {MAX_ATTEMPTS_MAX}, got {max_attempts}")
    return {"join_required": join_required, "max_size": max_size, "max_attempts": max_attempts}


def cohort_size_check(size: int | None) -> int | None:
    """A board's cohort size: None (no cohorts) or COHORT_SIZE_MIN..COHORT_SIZE_MAX."""
    if size is not None and not COHORT_SIZE_MIN <= size <= COHORT_SIZE_MAX:
        raise ValidationError(
            f"cohort size must be {COHORT_SIZE_MIN} to {COHORT_SIZE_MAX}, got {size}"
        )
    return size


def event_top_n_check(top_n: int) -> int:
    """The top N of a board's entered_top and left_top events: 1..EVENT_TOP_N_MAX."""
    if not 1 <= top_n <= EVENT_TOP_N_MAX:
        raise ValidationError(f"event top N must be 1 to {EVENT_TOP_N_MAX}, got {top_n}")
    return top_n


def tiebreak_columns_json(tiebreaks: Sequence[TiebreakColumn]) -> list[dict[str, str]]:
    """Tie-break columns as Board.tiebreak_columns stores them, checked (names unique, at most
    MAX_TIEBREAK_COLUMNS)."""
    try:
        checked = tiebreak_columns_check(list(tiebreaks))
    except TiebreakSpecError as exc:
        raise ValidationError(str(exc)) from exc
    return [{"name": c.name, "order": c.order} for c in checked]


@transaction.atomic
def board_update(
    *,
    board_id: int,
    name: str,
    slug: str,
    order: str,
    rule: str,
    time_resolution_seconds: int,
    keeps_metadata: bool = False,
    tiebreaks: Sequence[TiebreakColumn] = (),
    cohort_size: int | None = None,
    rank_events: bool = True,
    event_top_n: int = EVENT_TOP_N_DEFAULT,
    join_required: bool = False,
    max_size: int | None = None,
    max_attempts: int | None = None,
) -> Board:
    """Change a board. Its slug, order, rule, time resolution, whether it keeps metadata and its
    tie-break columns only while it has no result: every stored score, standing and message
    naming it depends on them. Its rank events options at any time (the next batch applied
    follows them), and its tournament options (docs/tournaments.md: the next batch stored follows
    them; what was refused stays refused, the players who joined stay)."""
    board = Board.objects.select_for_update().select_related("season").get(pk=board_id)
    wanted = {
        "slug": slug,
        "order": order,
        "rule": rule,
        "time_resolution_seconds": time_resolution_seconds,
        "keeps_metadata": keeps_metadata,
        "tiebreak_columns": tiebreak_columns_json(tiebreaks),
        "cohort_size": cohort_size_check(cohort_size),
    }
    changed = [field for field, value in wanted.items() if getattr(board, field) != value]
    if changed and board.season.status == SeasonStatus.CLOSED:
        # Its standings, grants and history name it as it was, pruned results or not.
        raise ValidationError(
            f"board {board.slug!r} belongs to a closed season: {', '.join(changed)} can no "
            "longer change"
        )
    if changed and board.match_results.exists():
        raise ValidationError(
            f"board {board.slug!r} has results: {', '.join(changed)} can no longer change"
        )
    if "time_resolution_seconds" in changed:
        try:
            codec = ScoreCodec.for_window(
                duration=board.season.ends_at - board.season.starts_at,
                resolution_seconds=time_resolution_seconds,
            )
        except CodecError as exc:
            raise ValidationError(str(exc)) from exc
        board.time_bits = codec.time_bits
    board.name = name
    board.rank_events = rank_events
    board.event_top_n = event_top_n_check(event_top_n)
    tournament = tournament_options_check(
        join_required=join_required, max_size=max_size, max_attempts=max_attempts
    )
    for field, option in tournament.items():
        setattr(board, field, option)
    for field, value in wanted.items():
        setattr(board, field, value)
    board.full_clean()
    board.save()
    return board


@transaction.atomic
def season_end_check(*, season_id: int, ends_at: datetime) -> list[Board]:
    """Whether the season's boards can take ``ends_at`` as its new end. Each board counts its
    scores' ticks from the start in the time bits fixed at its creation, and a result after the
    old end would spill its ticks into the points and rank wrongly without any error; so an end
    past what a board's bits hold is refused (ValidationError naming the board and the latest
    end it can take). Before the season can count any result (its start later than now plus
    the allowed clock skew and the processes' memo of boards), a board without results may take
    more bits instead: those are returned, for ``season_boards_fit``. Later, a consumer could
    still encode a result with the bits it memoized a moment ago, so every board keeps its bits.
    """
    season = Season.objects.filter(id=season_id).first()
    if season is None:
        raise ValidationError(f"season {season_id} does not exist")
    duration = ends_at - season.starts_at
    counting_from = timezone.now() + timedelta(
        seconds=settings.INGEST_MAX_FUTURE_SKEW_SECONDS + settings.LEADERBOARD_SEASON_CACHE_SECONDS
    )
    refit: list[Board] = []
    for board in Board.objects.filter(season_id=season_id).order_by("id"):
        try:
            codec = ScoreCodec.for_window(
                duration=duration, resolution_seconds=board.time_resolution_seconds
            )
        except CodecError as exc:
            raise ValidationError(f"board {board.slug!r}: {exc}") from exc
        if codec.time_bits <= board.time_bits:
            continue
        if season.starts_at > counting_from and not board.match_results.exists():
            refit.append(board)
            continue
        reach = season.starts_at + timedelta(
            seconds=board.codec.max_ticks * board.time_resolution_seconds
        )
        raise ValidationError(
            f"board {board.slug!r} counts the time of its scores in {board.time_bits} bits of "
            f"{board.time_resolution_seconds}s, fixed once the season can take results: the "
            f"season can end at {reach.isoformat()} at the latest"
        )
    return refit


@transaction.atomic
def season_boards_fit(*, season_id: int, ends_at: datetime) -> list[Board]:
    """Fit the season's boards to a new end before it is saved: the boards that may and must
    take more time bits take them (``season_end_check``); an end a board cannot reach raises
    ValidationError and changes nothing. The boards are locked while they change. Returns the
    refitted boards."""
    list(Board.objects.select_for_update().filter(season_id=season_id).order_by("id"))
    refit = season_end_check(season_id=season_id, ends_at=ends_at)
    starts_at = Season.objects.values_list("starts_at", flat=True).get(id=season_id)
    for board in refit:
        board.time_bits = ScoreCodec.for_window(
            duration=ends_at - starts_at, resolution_seconds=board.time_resolution_seconds
        ).time_bits
        board.save(update_fields=["time_bits"])
    return refit


def season_setup(
    *,
    season_id: int,
    name: str,
    starts_at: datetime,
    ends_at: datetime,
    rule: str = ScoringRule.BEST,
    order: str = BoardOrder.DESC,
    time_resolution_seconds: int = 1,
    keeps_metadata: bool = False,
    tiebreaks: Sequence[TiebreakColumn] = (),
    cohort_size: int | None = None,
    rank_events: bool = True,
    event_top_n: int = EVENT_TOP_N_DEFAULT,
    join_required: bool = False,
    max_size: int | None = None,
    max_attempts: int | None = None,
    main_board_name: str = "Main",
) -> Season:
    """Create a season with its ``main`` board (configured by ``rule``, ``order``,
    ``time_resolution_seconds``, ``keeps_metadata``, ``tiebreaks``, ``cohort_size``, the
    rank events and the tournament options), in one transaction: a board refused leaves no
    season behind (whose id a corrected retry could no longer take)."""
    with transaction.atomic():
        season = season_create(season_id=season_id, name=name, starts_at=starts_at, ends_at=ends_at)
        board_create(
            season_id=season.id,
            slug=MAIN_BOARD,
            name=main_board_name,
            order=order,
            rule=rule,
            time_resolution_seconds=time_resolution_seconds,
            keeps_metadata=keeps_metadata,
            tiebreaks=tiebreaks,
            cohort_size=cohort_size,
            rank_events=rank_events,
            event_top_n=event_top_n,
            join_required=join_required,
            max_size=max_size,
            max_attempts=max_attempts,
        )
    return season
