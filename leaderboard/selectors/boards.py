"""Which boards exist: ``BoardRef`` (a board detached from the ORM), lookups and lists, memoized
per process for the read path or fresh from PostgreSQL for tasks and services."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, OuterRef, QuerySet, Subquery

from seasons.memo import ProcessMemo, process_memo
from seasons.models import Season, SeasonStatus
from seasons.selectors import SeasonRef, schedule_require

from ..codec import TIEBREAK_VALUE_MAX, ScoreCodec, WideKeyCodec
from ..models import (
    EVENT_TOP_N_DEFAULT,
    MAIN_BOARD,
    Board,
    BoardOrder,
    TiebreakColumn,
    board_wide_codec,
)


@dataclass(frozen=True, slots=True)
class BoardRef:
    """What the read path and the board services need of a board, detached from the ORM."""

    id: int
    slug: str
    name: str
    order: str
    rule: str
    codec: ScoreCodec
    season: SeasonRef
    # Entries carry the metadata of each player's deciding result (contract 0.3).
    keeps_metadata: bool = False
    # The tie-break columns (contract 0.3); () for a plain board.
    tiebreaks: tuple[TiebreakColumn, ...] = ()
    # Players are grouped into cohorts of this many (contract 0.3); None: no cohorts.
    cohort_size: int | None = None
    # Rank events (docs/events.md): emitted or not, and the top N of entered_top/left_top.
    rank_events: bool = True
    event_top_n: int = EVENT_TOP_N_DEFAULT
    # A league board's tiers, lowest first, and the percent of each cohort moving up and down
    # at the close-out (docs/leagues.md); () elsewhere.
    tiers: tuple[str, ...] = ()
    promote_percent: int = 0
    relegate_percent: int = 0
    # A league board whose cohorts wait for the previous season's close-out (as read when
    # this ref was made: memoized refs may lag by LEADERBOARD_SEASON_CACHE_SECONDS).
    league_waiting: bool = False
    # Tournaments (docs/tournaments.md): only joined players' results count; at most max_size
    # may join, at most max_attempts distinct matches count per player (None: no limit).
    join_required: bool = False
    max_size: int | None = None
    max_attempts: int | None = None

    @property
    def season_id(self) -> int:
        return self.season.id

    @property
    def tiebreak_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.tiebreaks)

    @property
    def wide_codec(self) -> WideKeyCodec | None:
        """The wide-key codec of a board with tie-break columns; None for a plain board."""
        return board_wide_codec(
            tiebreaks=self.tiebreaks, time_bits=self.codec.time_bits, ascending=self.ascending
        )

    @property
    def max_points(self) -> int:
        return TIEBREAK_VALUE_MAX if self.tiebreaks else self.codec.max_points

    @property
    def ascending(self) -> bool:
        return self.order == BoardOrder.ASC

    def tier_name(self, tier: int | None) -> str | None:
        """The name of a tier (a position in ``tiers``); None for none."""
        if tier is None or not self.tiers:
            return None
        return self.tiers[min(tier, len(self.tiers) - 1)]

    @classmethod
    def from_model(cls, board: Board) -> BoardRef:
        return cls(
            id=board.id,
            slug=board.slug,
            name=board.name,
            order=board.order,
            rule=board.rule,
            codec=board.codec,
            season=SeasonRef.from_model(board.season),
            keeps_metadata=board.keeps_metadata,
            tiebreaks=board.tiebreaks,
            cohort_size=board.cohort_size,
            rank_events=board.rank_events,
            event_top_n=board.event_top_n,
            tiers=tuple(board.tiers),
            promote_percent=board.promote_percent,
            relegate_percent=board.relegate_percent,
            league_waiting=board.league_waiting,
            join_required=board.join_required,
            max_size=board.max_size,
            max_attempts=board.max_attempts,
        )


_boards: ProcessMemo[tuple[int, str], BoardRef | None] = process_memo(
    ttl_setting="LEADERBOARD_SEASON_CACHE_SECONDS",
    fallback_setting="LEADERBOARD_SEASON_FALLBACK_SECONDS",
)


def board_get_cached(*, season_id: int, slug: str = MAIN_BOARD) -> BoardRef | None:
    """The season's board ``slug``, or None if either does not exist; memoized per process for
    LEADERBOARD_SEASON_CACHE_SECONDS (a board's codec never changes; the season's status and
    dates only matter at that scale)."""

    def load() -> BoardRef | None:
        board = Board.objects.select_related("season").filter(season_id=season_id, slug=slug)
        found = board.first()
        return BoardRef.from_model(found) if found is not None else None

    return _boards.get((season_id, slug), load)


_board_lists: ProcessMemo[int, tuple[BoardRef, ...]] = process_memo(
    ttl_setting="LEADERBOARD_SEASON_CACHE_SECONDS",
    fallback_setting="LEADERBOARD_SEASON_FALLBACK_SECONDS",
)


def board_list_cached(*, season_id: int) -> tuple[BoardRef, ...]:
    """``board_list`` memoized per process like ``board_get_cached``: the boards list and the
    board pages read their sizes and entries from Redis, so with the list memoized they keep
    answering while PostgreSQL is down (seasons/memo.py: stale on error)."""
    return _board_lists.get(season_id, lambda: tuple(board_list(season_id=season_id)))


def board_get(*, board_id: int) -> BoardRef:
    """The board by id, fresh from PostgreSQL (tasks and services; Board.DoesNotExist if gone)."""
    return BoardRef.from_model(Board.objects.select_related("season").get(pk=board_id))


def board_find(*, season_id: int, slug: str) -> BoardRef | None:
    """The season's board ``slug`` fresh from PostgreSQL (writes: a join), or None."""
    found = Board.objects.select_related("season").filter(season_id=season_id, slug=slug).first()
    return BoardRef.from_model(found) if found is not None else None


def main_board_get(*, season_id: int) -> BoardRef:
    """The season's main board, fresh from PostgreSQL (Board.DoesNotExist if none)."""
    board = Board.objects.select_related("season").get(season_id=season_id, slug=MAIN_BOARD)
    return BoardRef.from_model(board)


def board_list(*, season_id: int) -> list[BoardRef]:
    """The season's boards, ``main`` first, then in creation order."""
    boards = Board.objects.select_related("season").filter(season_id=season_id).order_by("id")
    refs = [BoardRef.from_model(board) for board in boards]
    return sorted(refs, key=lambda ref: ref.slug != MAIN_BOARD)


def boards_of_seasons(*, season_ids: set[int]) -> dict[tuple[int, str], BoardRef]:
    """Every board of the given seasons by (season id, slug), fresh from PostgreSQL (ingestion
    validates each batch against it: statuses change, so no memo)."""
    boards = Board.objects.select_related("season").filter(season_id__in=season_ids)
    return {(board.season_id, board.slug): BoardRef.from_model(board) for board in boards}


def board_list_live() -> list[BoardRef]:
    """The boards of every season whose boards still move: active, or closing while the
    consumer drains its last results."""
    boards = (
        Board.objects.select_related("season")
        .filter(season__status__in=[SeasonStatus.ACTIVE, SeasonStatus.CLOSING])
        .order_by("season_id", "id")
    )
    return [BoardRef.from_model(board) for board in boards]


def board_list_open() -> list[BoardRef]:
    """The boards Redis must hold: those of every season not closed yet (a scheduled season's
    boards are read, empty, before its start; a closed season's keys are dropped)."""
    boards = (
        Board.objects.select_related("season")
        .exclude(season__status=SeasonStatus.CLOSED)
        .order_by("season_id", "id")
    )
    return [BoardRef.from_model(board) for board in boards]


def season_list_with_main_rule(
    *, status: str | None = None, schedule_slug: str | None = None
) -> QuerySet[Season]:
    """Every season (most recent start first), annotated with its main board's rule and its
    number of boards, with its schedule (the seasons list of the API and the pages); only those
    of ``status`` and of the schedule ``schedule_slug`` when given (UnknownSchedule if it does
    not exist). Lazy: the caller slices a page of it."""
    main_rule = Board.objects.filter(season_id=OuterRef("pk"), slug=MAIN_BOARD).values("rule")[:1]
    seasons = Season.objects.all()
    if status is not None:
        seasons = seasons.filter(status=status)
    if schedule_slug is not None:
        schedule_require(slug=schedule_slug)
        seasons = seasons.filter(schedule__slug=schedule_slug)
    return (
        seasons.select_related("schedule")
        .annotate(rule=Subquery(main_rule), boards_count=Count("boards"))
        .order_by("-starts_at", "-id")
    )
