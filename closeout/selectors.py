"""Reads of the close-out: the final standings (computed and stored), and whether the consumer
has drained the match-results topic."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count
from kafka import KafkaConsumer, TopicPartition

from leaderboard.models import MAIN_BOARD, Board, LeagueMovement
from leaderboard.selectors.boards import BoardRef
from leaderboard.selectors.metadata import entries_with_metadata
from leaderboard.selectors.rankings import NOT_KEPT
from leaderboard.selectors.scores import board_scores_top
from leaderboard.selectors.tournaments import entries_with_attempts
from players.selectors import player_profiles_get
from seasons.leagues import Movement
from seasons.models import Schedule, Season, SeasonStatus
from seasons.selectors import schedule_require

from .models import FinalStanding, HistoryEntry


@dataclass(frozen=True)
class StandingRow:
    rank: int
    player_id: int
    points: int
    reached_at: datetime
    # The deciding result's metadata on a board that keeps metadata; NOT_KEPT elsewhere.
    metadata: Any = NOT_KEPT
    # On a board with tie-break columns, each column's value by name; None elsewhere.
    tiebreakers: dict[str, int] | None = None
    # On a board with max-attempts, the player's attempts; None elsewhere.
    attempts: int | None = None

    @property
    def stored_metadata(self) -> Any:
        """As FinalStanding stores it: null where the board keeps none."""
        return None if self.metadata is NOT_KEPT else self.metadata


def board_standings_compute(*, board: BoardRef, limit: int) -> list[StandingRow]:
    """The board's top ``limit`` from PostgreSQL (the aggregation a rebuild loads), never from
    Redis, which may have lost writes. Ranks follow the board: encoded score, then the lower
    player id for an exact tie, so ranks are distinct and reproducible. On a board that keeps
    metadata, each row carries its deciding result's; on a board with max-attempts, the
    player's attempts."""
    codec = board.codec
    wide = board.wide_codec
    tick = timedelta(seconds=codec.resolution_seconds)
    starts_at = board.season.starts_at
    rows = []
    for index, score in enumerate(board_scores_top(board=board, limit=limit), start=1):
        tiebreakers = None
        if wide is not None:
            elapsed = wide.decode(str(score.score)).elapsed_ticks * tick
            tiebreakers = dict(zip(board.tiebreak_names, score.tiebreakers or (), strict=True))
        else:
            elapsed = codec.decode(score.score).elapsed
        rows.append(
            StandingRow(
                rank=index,
                player_id=score.player_id,
                points=score.points,
                # What the board shows: the start of the tick the score is credited to.
                reached_at=starts_at + elapsed,
                tiebreakers=tiebreakers,
            )
        )
    return entries_with_attempts(
        board=board, entries=entries_with_metadata(board=board, entries=rows)
    )


@dataclass(frozen=True, slots=True)
class FinalEntry:
    """A final standing as the API lists it: with the player's name and country as they read
    now, not as they were at close-out (null when unknown; a name staff hid is null, its
    country stays, as on the player card)."""

    rank: int
    player_id: int
    points: int
    reached_at: datetime
    display_name: str | None = None
    country: str | None = None
    metadata: Any = NOT_KEPT
    tiebreakers: dict[str, int] | None = None
    # On a league board: the tier played in and the movement decided at the close-out (null
    # for a player in no cohort); NOT_KEPT and None elsewhere.
    tier: Any = NOT_KEPT
    movement: str | None = None
    # On a board with max-attempts, the attempts at close-out (None: none, or not known for a
    # season closed before they were stored whose results were pruned).
    attempts: int | None = None


class SeasonNotFinal(Exception):
    """The season or board is unknown, or the season not closed: no final standings (yet)."""


def final_standings_list(
    *, season_id: int, limit: int, board_slug: str = MAIN_BOARD
) -> list[FinalEntry]:
    """A closed season's final entries on one board, best first, named from PostgreSQL (one
    query for the page's profiles: the standings already need PostgreSQL, and a hide shows at
    once); SeasonNotFinal says why there are none."""
    season = Season.objects.filter(id=season_id).only("id", "status").first()
    if season is None:
        raise SeasonNotFinal(f"season {season_id} does not exist")
    board = (
        Board.objects.filter(season_id=season_id, slug=board_slug)
        .only("id", "keeps_metadata", "tiers")
        .first()
    )
    if board is None:
        raise SeasonNotFinal(f"season {season_id} has no board {board_slug[:40]!r}")
    if season.status != SeasonStatus.CLOSED:
        raise SeasonNotFinal(
            f"season {season_id} is {season.status}; final standings exist once it is closed"
        )
    standings = list(FinalStanding.objects.filter(board_id=board.id).order_by("rank")[:limit])
    profiles = player_profiles_get(player_ids=[standing.player_id for standing in standings])
    moved: dict[int, tuple[str | None, str]] = {}
    if board.tiers:
        tiers = board.tiers
        moved = {
            player_id: (tiers[min(tier, len(tiers) - 1)], movement)
            for player_id, tier, movement in LeagueMovement.objects.filter(
                board_id=board.id, player_id__in=[standing.player_id for standing in standings]
            ).values_list("player_id", "tier", "movement")
        }
    entries: list[FinalEntry] = []
    for standing in standings:
        profile = profiles.get(standing.player_id)
        tier, movement = moved.get(standing.player_id, (None, None))
        entries.append(
            FinalEntry(
                rank=standing.rank,
                player_id=standing.player_id,
                points=standing.points,
                reached_at=standing.reached_at,
                display_name=None if profile is None else profile.visible_name,
                country=None if profile is None else profile.country,
                metadata=standing.metadata if board.keeps_metadata else NOT_KEPT,
                tiebreakers=standing.tiebreakers,
                tier=tier if board.tiers else NOT_KEPT,
                movement=movement,
                attempts=standing.attempts,
            )
        )
    return entries


# --- Close-out: has the consumer drained the match-results topic? --------------------------------


@dataclass(frozen=True, slots=True)
class PartitionLag:
    """A partition whose results below ``end_offset`` are not all handled yet."""

    partition: int
    end_offset: int  # recorded when the close-out began waiting
    committed: int | None  # the consumer group's next offset to read; None: never committed

    def describe(self) -> str:
        at = "nothing committed" if self.committed is None else f"committed {self.committed}"
        behind = self.end_offset - (self.committed or 0)
        return f"partition {self.partition} ({at}, needs {self.end_offset}: {behind} behind)"


@contextmanager
def kafka_offsets_reader(*, group_id: str | None = None) -> Iterator[KafkaConsumer]:
    """A consumer that only reads offsets: it never subscribes, joins or commits."""
    consumer = KafkaConsumer(
        bootstrap_servers=list(settings.KAFKA_BOOTSTRAP_SERVERS),
        group_id=group_id,
        client_id="season-close-drain",
        enable_auto_commit=False,
        request_timeout_ms=10_000,
        # Kafka down: say so within seconds (the close-out then finalizes nothing) rather than
        # hold a worker for the default 30 s.
        bootstrap_timeout_ms=5_000,
    )
    try:
        yield consumer
    finally:
        consumer.close(autocommit=False)


def topic_end_offsets_get(*, topic: str) -> dict[int, int]:
    """Each partition's end offset (the offset the next message will get); {} for no topic."""
    with kafka_offsets_reader() as reader:
        partitions = [
            TopicPartition(topic, p) for p in sorted(reader.partitions_for_topic(topic) or ())
        ]
        ends = reader.end_offsets(partitions) if partitions else {}
    return {tp.partition: int(offset) for tp, offset in ends.items()}


def consumer_group_lag_get(
    *, reader: KafkaConsumer, topic: str, end_offsets: Mapping[int, int]
) -> list[PartitionLag]:
    """The partitions where ``reader``'s group has not committed up to ``end_offsets``.

    The consumer commits a batch only after PostgreSQL stored it, the boards hold it and its
    dead letters are acknowledged (ingestion/consumer.py), so a committed offset >= the recorded
    end proves every earlier result is counted. A partition whose retention already deleted
    everything up to the end has nothing left to drain.
    """
    lagging: list[PartitionLag] = []
    for partition, end in sorted(end_offsets.items()):
        if end <= 0:
            continue
        tp = TopicPartition(topic, partition)
        committed = reader.committed(tp)
        if committed is not None and committed >= end:
            continue
        if reader.beginning_offsets([tp]).get(tp, 0) >= end:
            continue
        lagging.append(PartitionLag(partition, end, committed))
    return lagging


# --- Schedules' archives -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TierMovements:
    """How the players of one tier of a league board left it at the close-out."""

    tier: str
    promoted: int
    stayed: int
    relegated: int


@dataclass(frozen=True, slots=True)
class LeagueMovements:
    board: str  # the league board's slug
    tiers: list[TierMovements]  # lowest first


@dataclass(frozen=True, slots=True)
class ArchivedSeason:
    """A closed season of a schedule with the top of its main board's final standings, and on a
    league, how many players each tier sent up and down."""

    season: Season
    winners: list[FinalEntry]
    leagues: list[LeagueMovements] = field(default_factory=list)
    # Its main board (the winners' columns: tie-break columns, metadata); None without one.
    board: BoardRef | None = None


def league_movements_summary(*, season_ids: list[int]) -> dict[int, list[LeagueMovements]]:
    """Each closed season's league boards: per tier, how many players moved up, stayed, moved
    down (one grouped query over the seasons' movements, one for their boards)."""
    counts: dict[int, Counter[tuple[int, str]]] = {}
    rows = (
        LeagueMovement.objects.filter(board__season_id__in=season_ids)
        .values_list("board_id", "tier", "movement")
        .annotate(players=Count("id"))
    )
    for board_id, tier, movement, players in rows:
        counts.setdefault(board_id, Counter())[(tier, movement)] += players
    boards = Board.objects.in_bulk(list(counts))
    out: dict[int, list[LeagueMovements]] = {}
    for board_id, moved in sorted(counts.items()):
        board = boards[board_id]
        tiers = [
            TierMovements(
                tier=name,
                promoted=moved[(position, Movement.PROMOTED)],
                stayed=moved[(position, Movement.STAYED)],
                relegated=moved[(position, Movement.RELEGATED)],
            )
            for position, name in enumerate(board.tiers)
        ]
        out.setdefault(board.season_id, []).append(LeagueMovements(board.slug, tiers))
    return out


def schedule_archive(
    *, schedule: Schedule, limit: int, offset: int = 0, top: int = 10
) -> tuple[list[ArchivedSeason], int]:
    """The schedule's closed seasons, newest first, each with its ``top`` final entries (main
    board), and how many closed seasons there are."""
    closed = Season.objects.filter(schedule=schedule, status=SeasonStatus.CLOSED)
    total = closed.count()
    seasons = list(closed.order_by("-occurrence")[offset : offset + limit])
    archived = []
    season_ids = [season.id for season in seasons]
    leagues = league_movements_summary(season_ids=season_ids)
    boards = {
        board.season_id: BoardRef.from_model(board)
        for board in Board.objects.select_related("season").filter(
            season_id__in=season_ids, slug=MAIN_BOARD
        )
    }
    for season in seasons:
        try:
            winners = final_standings_list(season_id=season.id, limit=top)
        except SeasonNotFinal:
            winners = []
        archived.append(
            ArchivedSeason(season, winners, leagues.get(season.id, []), boards.get(season.id))
        )
    return archived, total


# --- Players' history ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HistoryItem:
    """One archived final entry, as ``GET /api/players/{player}/history`` lists it."""

    season_id: int
    season_name: str
    schedule: str | None  # the slug of the schedule that started the season
    occurrence: int | None
    board: str
    rank: int
    points: int
    percentile: float
    total: int
    ends_at: datetime
    reward: dict[str, Any] | None  # {"name", "quantity"} of the grant, or None
    # On a league board: the tier played in and how the player left it (promoted, relegated,
    # stayed); None elsewhere.
    tier: str | None = None
    movement: str | None = None


def player_history(
    *,
    player_id: int,
    limit: int,
    offset: int = 0,
    schedule_slug: str | None = None,
    board_slug: str | None = None,
) -> list[HistoryItem]:
    """The player's archived final entries, newest season first (the history_player_newest
    index), optionally of one schedule's seasons and one board slug."""
    rows = HistoryEntry.objects.filter(player_id=player_id)
    if schedule_slug is not None:
        schedule_require(slug=schedule_slug)
        rows = rows.filter(season__schedule__slug=schedule_slug)
    if board_slug is not None:
        rows = rows.filter(board__slug=board_slug)
    # Plain values, not models: 50 rows of three models each cost several milliseconds.
    entries = rows.order_by("-season_ends_at", "-season_id", "board_id").values_list(
        "season_id",
        "season__name",
        "season__schedule__slug",
        "season__occurrence",
        "board__slug",
        "rank",
        "points",
        "total",
        "season_ends_at",
        "reward_name",
        "reward_quantity",
        "tier",
        "movement",
    )[offset : offset + limit]
    return [
        HistoryItem(
            season_id=season_id,
            season_name=season_name,
            schedule=schedule,
            occurrence=occurrence,
            board=board,
            rank=rank,
            points=points,
            # As every live entry's percentile (leaderboard/selectors/rankings.py).
            percentile=round((total - rank + 1) * 100 / total, 2),
            total=total,
            ends_at=ends_at,
            reward=(
                {"name": reward_name, "quantity": reward_quantity}
                if reward_name is not None
                else None
            ),
            tier=tier,
            movement=movement,
        )
        for (
            season_id,
            season_name,
            schedule,
            occurrence,
            board,
            rank,
            points,
            total,
            ends_at,
            reward_name,
            reward_quantity,
            tier,
            movement,
        ) in entries
    ]
