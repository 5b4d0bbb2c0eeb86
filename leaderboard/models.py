from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone

from seasons.leagues import Movement
from seasons.models import Season

from .codec import MAX_TIEBREAK_COLUMNS, TIEBREAK_VALUE_MAX, ScoreCodec, WideKeyCodec

# Every season has this board; the API's /leaderboard/... paths and a message without a
# "board" field mean it.
MAIN_BOARD = "main"
BOARD_SLUG_PATTERN = r"^[a-z0-9-]{1,32}$"
TIEBREAK_NAME_PATTERN = r"^[a-z][a-z0-9_]{0,15}$"
COHORT_SIZE_MIN = 2
COHORT_SIZE_MAX = 1000
# Rank events (docs/events.md): entered_top and left_top are about a board's top N.
EVENT_TOP_N_DEFAULT = 100
EVENT_TOP_N_MAX = 100_000
# Tournaments (docs/tournaments.md): the bounds of --max-size and --max-attempts. Past them a
# value is a typo rather than a tournament (a board holding more players needs no seats).
MAX_SIZE_MAX = 10_000_000
MAX_ATTEMPTS_MAX = 10_000


class BoardOrder(models.TextChoices):
    DESC = "desc", "Higher wins"
    ASC = "asc", "Lower wins"


class ScoringRule(models.TextChoices):
    BEST = "best", "Best single match"
    LATEST = "latest", "Latest result"
    CUMULATIVE = "cumulative", "Sum over matches"


class Board(models.Model):
    """One ranking of a season, with everything its encoded scores depend on.

    ``order``, ``rule``, ``time_resolution_seconds``, ``time_bits`` and ``keeps_metadata`` are
    fixed once the board has results: every score in Redis and every stored standing was
    computed with them.
    """

    season = models.ForeignKey(Season, on_delete=models.CASCADE, related_name="boards")
    slug = models.CharField(
        max_length=32,
        validators=[RegexValidator(BOARD_SLUG_PATTERN, "1 to 32 characters: a-z, 0-9 and '-'.")],
        help_text='Names the board in the API and in match results ("board").',
    )
    name = models.CharField(max_length=200)
    order = models.CharField(max_length=4, choices=BoardOrder.choices, default=BoardOrder.DESC)
    rule = models.CharField(max_length=16, choices=ScoringRule.choices, default=ScoringRule.BEST)
    time_resolution_seconds = models.PositiveIntegerField(
        default=1, help_text="Tie-break granularity: equal points reached in one tick tie."
    )
    # Fixed at creation from the season's length and the resolution (see leaderboard/codec.py).
    time_bits = models.PositiveSmallIntegerField(editable=False)
    # Contract 0.3: entries carry the metadata of the result that gives each player's value.
    # Fixed once the board has results: the results stored before would have none.
    keeps_metadata = models.BooleanField(
        default=False,
        help_text="Keep each result's metadata; entries carry the deciding result's.",
    )
    # Contract 0.3: up to three columns ranked after points, each with its own order, as
    # [{"name": "kills", "order": "desc"}, ...]; fixed once the board has results. A board with
    # columns keeps wide keys in Redis (leaderboard/codec.py, WideKeyCodec).
    tiebreak_columns = models.JSONField(
        default=list,
        blank=True,
        help_text="Columns ranked after points, in order, each with its own direction.",
    )
    # Contract 0.3: players are grouped, at their first counted result, into cohorts of this
    # many (leaderboard/services/cohorts.py); null: no cohorts. Fixed once the board has
    # results: every assignment was made with it.
    cohort_size = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        help_text=f"Group players into cohorts of this many ({COHORT_SIZE_MIN} to "
        f"{COHORT_SIZE_MAX}); empty: no cohorts.",
    )
    # Contract 0.3: rank events (docs/events.md). Both may change at any time: the apply script
    # takes them with each call, and no stored score depends on them.
    rank_events = models.BooleanField(
        default=True,
        help_text="Emit rank events (personal_best, rank_changed, entered_top, left_top, "
        "overtaken, season_final) to the rank-events topic.",
    )
    event_top_n = models.PositiveIntegerField(
        default=EVENT_TOP_N_DEFAULT,
        help_text=f"The top N that entered_top and left_top are about (1 to {EVENT_TOP_N_MAX}).",
    )
    # Contract 0.3, tiered leagues (docs/leagues.md): a board with cohorts of a schedule's season
    # whose schedule has tiers is a league board. Its tiers (lowest first) and the percent of
    # each cohort that moves up and down are copied from the schedule when the season is
    # created, so a season keeps the league it was played under; each cohort holds one tier.
    tiers = ArrayField(
        models.CharField(max_length=32),
        default=list,
        blank=True,
        help_text="League tiers, lowest first (copied from the schedule); empty: not a league.",
    )
    promote_percent = models.PositiveSmallIntegerField(default=0)
    relegate_percent = models.PositiveSmallIntegerField(default=0)
    # True while the previous season of the league is not closed: its close-out decides the
    # tier every player plays in here, so nobody joins a cohort yet (their results count on
    # the board all the same); the close-out's next step assigns them, in the order of their
    # first result, and clears it (leaderboard/services/leagues.py).
    league_waiting = models.BooleanField(default=False, editable=False)
    # Players in the board's cohorts, raised by every assignment in its transaction (under the
    # board's cohort lock): a batch that read it before taking the lock and finds it unchanged
    # once it holds the lock knows nobody was assigned meanwhile (services/results.py).
    cohort_members = models.BigIntegerField(default=0, editable=False)
    # Contract 0.3, tournaments (docs/tournaments.md): only players who joined
    # (POST .../players/{p}/join) may have results counted; at most max_size of them; at most
    # max_attempts distinct matches per player. May change at any time: ingestion reads them in
    # the transaction that stores each batch, and what it refused stays refused.
    join_required = models.BooleanField(
        default=False,
        help_text="Count only the results of players who joined the board (a tournament).",
    )
    max_size = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text=f"At most this many players may join (1 to {MAX_SIZE_MAX}); empty: no limit. "
        "Needs join required.",
    )
    max_attempts = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text=f"Count at most this many distinct matches per player (1 to "
        f"{MAX_ATTEMPTS_MAX}); empty: no limit.",
    )
    # Players who joined, raised and lowered only under the board row's lock by the join and
    # removal services (services/tournaments.py), so the seat count is one read, not a count.
    participants = models.PositiveIntegerField(default=0, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["season", "id"]
        constraints = [
            models.UniqueConstraint(fields=["season", "slug"], name="board_season_slug_uniq"),
            models.CheckConstraint(
                condition=models.Q(slug__regex=BOARD_SLUG_PATTERN), name="board_slug_format"
            ),
            models.CheckConstraint(
                condition=models.Q(time_resolution_seconds__gte=1),
                name="board_time_resolution_positive",
            ),
            models.CheckConstraint(
                condition=models.Q(order__in=BoardOrder.values), name="board_order_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(rule__in=ScoringRule.values), name="board_rule_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(cohort_size__isnull=True)
                | models.Q(cohort_size__gte=COHORT_SIZE_MIN, cohort_size__lte=COHORT_SIZE_MAX),
                name="board_cohort_size_range",
            ),
            models.CheckConstraint(
                condition=models.Q(event_top_n__gte=1, event_top_n__lte=EVENT_TOP_N_MAX),
                name="board_event_top_n_range",
            ),
            models.CheckConstraint(
                condition=models.Q(max_size__isnull=True)
                | models.Q(max_size__gte=1, max_size__lte=MAX_SIZE_MAX, join_required=True),
                name="board_max_size_range",
            ),
            models.CheckConstraint(
                condition=models.Q(max_attempts__isnull=True)
                | models.Q(max_attempts__gte=1, max_attempts__lte=MAX_ATTEMPTS_MAX),
                name="board_max_attempts_range",
            ),
            # A league ranks its players in cohorts, one tier each.
            models.CheckConstraint(
                condition=models.Q(tiers=[]) | models.Q(cohort_size__isnull=False),
                name="board_league_has_cohorts",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.slug}, season {self.season_id})"

    def clean(self) -> None:
        try:
            tiebreak_columns_parse(self.tiebreak_columns)
        except TiebreakSpecError as exc:
            raise ValidationError({"tiebreak_columns": str(exc)}) from exc

    @property
    def codec(self) -> ScoreCodec:
        return board_codec(
            time_bits=self.time_bits,
            resolution_seconds=self.time_resolution_seconds,
            ascending=self.order == BoardOrder.ASC,
        )

    @property
    def tiebreaks(self) -> tuple[TiebreakColumn, ...]:
        return tiebreak_columns_parse(self.tiebreak_columns)

    @property
    def tiebreak_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.tiebreaks)

    @property
    def max_points(self) -> int:
        """The most points a result may carry: the codec's, or TIEBREAK_VALUE_MAX on a board
        with tie-break columns (its wide keys hold 31 bits per value)."""
        return TIEBREAK_VALUE_MAX if self.tiebreak_columns else self.codec.max_points

    @property
    def wide_codec(self) -> WideKeyCodec | None:
        """The wide-key codec of a board with tie-break columns; None for a plain board."""
        return board_wide_codec(
            tiebreaks=self.tiebreaks,
            time_bits=self.time_bits,
            ascending=self.order == BoardOrder.ASC,
        )


@dataclass(frozen=True, slots=True)
class TiebreakColumn:
    name: str
    order: str

    @property
    def ascending(self) -> bool:
        return self.order == BoardOrder.ASC

    def __str__(self) -> str:
        return f"{self.name}:{self.order}"


class TiebreakSpecError(ValueError):
    """A tie-break column spec that is not ``name:order``, or a list of them the board can't
    rank by."""


def tiebreak_columns_parse(raw: object) -> tuple[TiebreakColumn, ...]:
    """Board.tiebreak_columns (a list of {"name", "order"}) as TiebreakColumns, checked."""
    if not isinstance(raw, list):
        raise TiebreakSpecError(f"tie-break columns must be a list, got {raw!r}")
    columns = []
    for item in raw:
        if not isinstance(item, dict) or set(item) != {"name", "order"}:
            raise TiebreakSpecError(f'each tie-break column is {{"name", "order"}}, got {item!r}')
        columns.append(tiebreak_column_check(name=item["name"], order=item["order"]))
    return tiebreak_columns_check(columns)


def tiebreak_column_check(*, name: object, order: object) -> TiebreakColumn:
    if not isinstance(name, str) or not re.fullmatch(TIEBREAK_NAME_PATTERN, name):
        raise TiebreakSpecError(
            f"tie-break column name {name!r} must be a-z then up to 15 of a-z, 0-9 and '_'"
        )
    if order not in BoardOrder.values:
        raise TiebreakSpecError(
            f"tie-break column {name}: order must be asc or desc, got {order!r}"
        )
    return TiebreakColumn(name, str(order))


def tiebreak_columns_check(columns: list[TiebreakColumn]) -> tuple[TiebreakColumn, ...]:
    if len(columns) > MAX_TIEBREAK_COLUMNS:
        raise TiebreakSpecError(
            f"a board ranks by at most {MAX_TIEBREAK_COLUMNS} tie-break columns, got {len(columns)}"
        )
    names = [c.name for c in columns]
    if len(set(names)) != len(names):
        raise TiebreakSpecError(f"tie-break column names repeat: {', '.join(names)}")
    return tuple(columns)


def tiebreak_spec_parse(spec: str) -> TiebreakColumn:
    """One ``--tiebreak name:order`` argument."""
    name, sep, order = spec.partition(":")
    if not sep:
        raise TiebreakSpecError(f"--tiebreak {spec!r}: expected name:order (e.g. kills:desc)")
    return tiebreak_column_check(name=name, order=order)


@cache
def board_wide_codec(
    *, tiebreaks: tuple[TiebreakColumn, ...], time_bits: int, ascending: bool
) -> WideKeyCodec | None:
    if not tiebreaks:
        return None
    return WideKeyCodec(
        ascending=(ascending, *(c.ascending for c in tiebreaks)), time_bits=time_bits
    )


@cache
def board_codec(*, time_bits: int, resolution_seconds: int, ascending: bool) -> ScoreCodec:
    # Codecs are immutable and few: ingestion asks for one per result, and building a fresh one
    # (its bounds checks) each time was a tenth of the consumer's CPU per result.
    return ScoreCodec(
        points_bits=53 - time_bits,
        time_bits=time_bits,
        resolution_seconds=resolution_seconds,
        ascending=ascending,
    )


class MatchResult(models.Model):
    """One player's result in one match on one board: the source of truth every board is
    rebuilt from.

    ``(match_id, player_id, board)`` is unique: ingestion inserts with ON CONFLICT DO NOTHING,
    so a result delivered twice is stored once, and one match may count on several boards.
    """

    id = models.BigAutoField(primary_key=True)
    match_id = models.UUIDField()
    player_id = models.BigIntegerField()
    # No index of its own: one index less is one write less per ingested result. No
    # per-row constraint check either (a sixth of PostgreSQL's CPU per result): ingestion
    # locks the batch's seasons once per batch instead, and a trigger refuses deleting a season
    # that has results (migration 0006 says how the guarantee is kept).
    season = models.ForeignKey(
        Season,
        on_delete=models.PROTECT,
        related_name="match_results",
        db_index=False,
        db_constraint=False,
    )
    # The board's season is kept on the row too: ingestion locks seasons per batch and bans
    # apply per season, and neither should need a join per result.
    # Not checked per row either, for the same reason as the season (migration 0005 of
    # leaderboard: the batch locks its boards, a trigger refuses deleting a board with results).
    board = models.ForeignKey(
        Board,
        on_delete=models.PROTECT,
        related_name="match_results",
        db_index=False,
        db_constraint=False,
    )
    points = models.BigIntegerField()
    achieved_at = models.DateTimeField()
    ingested_at = models.DateTimeField(default=timezone.now)
    # The result's metadata (contract 0.3), on boards that keep it (Board.keeps_metadata);
    # null elsewhere and when the result had none.
    metadata = models.JSONField(null=True, blank=True)
    # The values of the board's tie-break columns (contract 0.3), in the board's column order;
    # null on boards without columns. points may then go up to TIEBREAK_VALUE_MAX.
    tiebreakers = ArrayField(models.IntegerField(), null=True, blank=True)
    # Staff corrections: a voided result stays for audit but no longer counts.
    voided_at = models.DateTimeField(null=True, blank=True)
    void_reason = models.CharField(max_length=500, blank=True, default="")
    # Where the result came from: ingestion uses it to tell "this very message was stored but
    # not yet applied to Redis" (a crash in between) from "a duplicate of an applied result".
    kafka_partition = models.IntegerField(null=True, blank=True)
    kafka_offset = models.BigIntegerField(null=True, blank=True)
    # The PostgreSQL transaction that inserted the row (pg_current_xact_id()): a rebuild compares
    # it with its snapshot to tell results it already counted from ones applied during it.
    ingest_xid = models.BigIntegerField(null=True, blank=True)

    class Meta:
        # The table kept its name when the model moved here from ``ingestion``: migration 0006
        # of ingestion names it in a trigger, and a rename gains a deployment nothing.
        db_table = "ingestion_matchresult"
        constraints = [
            models.UniqueConstraint(
                fields=["match_id", "player_id", "board"],
                name="match_result_match_player_board_uniq",
            ),
            models.CheckConstraint(
                condition=models.Q(points__gte=0), name="match_result_points_non_negative"
            ),
        ]
        indexes = [
            # The rebuild's DISTINCT ON (player_id) ... ORDER BY player_id, points DESC,
            # achieved_at reads this index in order, no sort (other orders and rules sort
            # within each player: an incremental sort). voided_at is carried in it, so
            # the aggregation (which skips voided results) never visits the table: an
            # index-only scan, about 3x faster at 20M rows than fetching each row's voided_at.
            # Not partial on the counted rows: staff look results up by season and player,
            # voided ones included.
            models.Index(
                fields=["board", "player_id", "-points", "achieved_at"],
                name="match_result_board_player_idx",
                include=["voided_at"],
            ),
        ]

    def __str__(self) -> str:
        return f"match {self.match_id} player {self.player_id}: {self.points}"


class Cohort(models.Model):
    """One group of a board with cohorts (contract 0.3): up to the board's cohort_size players,
    numbered from 1 per board in the order they opened. Its ranks are read from the board
    itself (the members' scores), so nothing of it lives in Redis."""

    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="cohorts")
    number = models.PositiveIntegerField()
    # The league tier its members play in (tiered leagues); null on a board without tiers.
    tier = models.PositiveSmallIntegerField(null=True, blank=True)
    members = models.PositiveIntegerField(default=0)
    opened_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["board", "number"]
        constraints = [
            models.UniqueConstraint(fields=["board", "number"], name="cohort_board_number_uniq"),
        ]

    def __str__(self) -> str:
        return f"cohort {self.number} of board {self.board_id}"


class CohortMember(models.Model):
    """A player's cohort on a board: assigned once, at their first counted result, in the
    transaction that stores it; never changed (replays, rebuilds and recovery read it)."""

    # Neither checked per row nor indexed alone (two foreign-key lookups and two more index
    # entries per player joining were most of the cost of an assignment): ingestion writes a
    # membership only under the batch's lock of the board (services/results.py), into a cohort
    # it read or created in the same transaction; deleting a board or a cohort deletes its
    # memberships (the ORM's cascade); the two indexes below lead with each.
    board = models.ForeignKey(
        Board, on_delete=models.CASCADE, related_name="+", db_constraint=False, db_index=False
    )
    cohort = models.ForeignKey(
        Cohort,
        on_delete=models.CASCADE,
        related_name="memberships",
        db_constraint=False,
        db_index=False,
    )
    player_id = models.BigIntegerField()
    joined_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["board", "player_id"], name="cohort_member_board_player_uniq"
            ),
        ]
        indexes = [models.Index(fields=["cohort", "player_id"], name="cohort_member_cohort_idx")]

    def __str__(self) -> str:
        return f"player {self.player_id} in cohort {self.cohort_id}"


class LeagueMovement(models.Model):
    """A player's league result on a league board, decided at its season's close-out from
    PostgreSQL (closeout/services/leagues.py), in the transaction that writes the final
    standings: the tier they played in, their place in their cohort and where they go next.
    A player's tier on the league's next board is their latest movement's ``next_tier`` (the
    first tier without one): kept as long as the league runs, whatever the history's
    retention."""

    # Written by one INSERT ... SELECT per board in the close-out's transaction, which holds
    # the board: not checked per row (millions of rows on a large board), nor indexed alone (the
    # unique (board, player) leads with it).
    board = models.ForeignKey(
        Board,
        on_delete=models.CASCADE,
        related_name="league_movements",
        db_constraint=False,
        db_index=False,
    )
    player_id = models.BigIntegerField()
    tier = models.PositiveSmallIntegerField()  # the position of the tier in board.tiers
    # Within the cohort as the final standings rank: the board's order, then the lower player
    # id on an exact tie (what reward tiers of a league board are paid by).
    cohort_rank = models.PositiveIntegerField()
    movement = models.CharField(max_length=16, choices=Movement.choices)
    next_tier = models.PositiveSmallIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["board", "player_id"], name="league_movement_board_player"
            ),
            models.CheckConstraint(
                condition=models.Q(movement__in=Movement.values), name="league_movement_valid"
            ),
        ]
        indexes = [
            # A player's tier on a new board: their latest movement in the league.
            models.Index(fields=["player_id", "board"], name="league_movement_player"),
        ]

    def __str__(self) -> str:
        return f"player {self.player_id} {self.movement} on board {self.board_id}"


class Participant(models.Model):
    """A player who joined a board that requires joining (a tournament): only their results
    count on it (docs/tournaments.md). Written by ``board_player_join`` under the board row's
    lock, which is what keeps a full board from taking one more."""

    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="+", db_index=False)
    player_id = models.BigIntegerField()
    joined_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["board", "joined_at", "player_id"]
        constraints = [
            # Also the index of every lookup (board first): who joined, and is this one in.
            models.UniqueConstraint(
                fields=["board", "player_id"], name="participant_board_player_uniq"
            ),
        ]

    def __str__(self) -> str:
        return f"player {self.player_id} on board {self.board_id}"


class RefusalCode(models.TextChoices):
    NOT_JOINED = "not_joined", "Not joined"
    ATTEMPTS_EXHAUSTED = "attempts_exhausted", "Attempts exhausted"


class RefusedResult(models.Model):
    """A result a tournament board refused (the player had not joined, or had used every
    attempt), decided once in the transaction that would have stored it, and kept so that a
    redelivery or a replay of the same result is never decided, nor dead-lettered, again
    (docs/tournaments.md). ``(match_id, player_id, board)`` is unique, as for stored results."""

    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="+", db_index=False)
    match_id = models.UUIDField()
    player_id = models.BigIntegerField()
    code = models.CharField(max_length=32, choices=RefusalCode.choices)
    # The Kafka record that carried it: only that record's batch dead-letters it, and only
    # while dead_lettered_at is empty (a crash before the letter was acknowledged).
    kafka_partition = models.IntegerField()
    kafka_offset = models.BigIntegerField()
    refused_at = models.DateTimeField(default=timezone.now, editable=False)
    # When the dead letter was acknowledged by the broker; empty until then.
    dead_lettered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["match_id", "player_id", "board"], name="refused_result_uniq"
            ),
            models.CheckConstraint(
                condition=models.Q(code__in=RefusalCode.values), name="refused_result_code_valid"
            ),
        ]
        indexes = [models.Index(fields=["board", "player_id"], name="refused_result_board_idx")]

    def __str__(self) -> str:
        return f"match {self.match_id} player {self.player_id}: {self.code}"


class PlayerBan(models.Model):
    """A player excluded from one season: none of their results count on its boards."""

    season = models.ForeignKey(Season, on_delete=models.CASCADE, related_name="bans")
    player_id = models.BigIntegerField()
    reason = models.CharField(max_length=500)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["season", "player_id"], name="player_ban_season_player_uniq"
            )
        ]

    def __str__(self) -> str:
        return f"player {self.player_id} banned from season {self.season_id}"


class RunStatus(models.TextChoices):
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"


class RebuildRun(models.Model):
    """One rebuild of one board (the season-long one, or one UTC day's), for audit and timing."""

    season = models.ForeignKey(Season, on_delete=models.CASCADE, related_name="rebuilds")
    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="rebuilds")
    day = models.DateField(null=True, blank=True, help_text="Empty: the season-long board.")
    reason = models.CharField(max_length=200, blank=True, default="")
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.RUNNING)
    members = models.BigIntegerField(default=0)
    delta_members = models.BigIntegerField(default=0)
    # Players whose cumulative points overflow the codec: left off the board, never clamped.
    overflowed_count = models.BigIntegerField(default=0)
    overflowed_players = models.JSONField(
        default=list, blank=True, help_text="The first 1000 player ids left off for overflowing."
    )
    started_at = models.DateTimeField(default=timezone.now, editable=False)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-started_at"]

    def __str__(self) -> str:
        which = self.day.isoformat() if self.day else "season-long"
        return f"rebuild of board {self.board_id} {which}: {self.status}"


class ReconcileRun(models.Model):
    """One comparison of a board in Redis against PostgreSQL, with the drift it found."""

    season = models.ForeignKey(Season, on_delete=models.CASCADE, related_name="reconciles")
    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="reconciles")
    day = models.DateField(null=True, blank=True, help_text="Empty: the season-long board.")
    checked_at = models.DateTimeField(default=timezone.now, editable=False)
    redis_members = models.BigIntegerField()
    expected_members = models.BigIntegerField()
    sample_size = models.PositiveIntegerField()
    mismatched_scores = models.PositiveIntegerField()
    # A few mismatches for staff to look at: [{"player_id", "redis", "expected"}, ...].
    mismatch_examples = models.JSONField(default=list, blank=True)
    drift_found = models.BooleanField()
    rebuilt = models.BooleanField(default=False)

    class Meta:
        ordering = ["-checked_at"]

    def __str__(self) -> str:
        state = "drift" if self.drift_found else "in sync"
        return f"reconcile of board {self.board_id} at {self.checked_at:%Y-%m-%d %H:%M}: {state}"
