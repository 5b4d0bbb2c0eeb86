"""What a season's close-out produces and pays: reward tiers, final standings, grants.

These models lived in ``seasons`` before the close-out became its own app; their tables keep
their names (``db_table``), so the move changed no row and no constraint (migration 0001 is
state-only).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.constraints import ExclusionConstraint
from django.contrib.postgres.fields import IntegerRangeField, RangeOperators
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from leaderboard.models import Board
from seasons.leagues import Movement
from seasons.models import Schedule, Season


class RewardTier(models.Model):
    """What the players ranked ``rank_from``..``rank_to`` (inclusive) of one board receive."""

    # The season as well as the board: staff edit tiers inline on the season.
    season = models.ForeignKey(Season, on_delete=models.CASCADE, related_name="reward_tiers")
    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="reward_tiers")
    rank_from = models.PositiveIntegerField()
    rank_to = models.PositiveIntegerField()
    reward_name = models.CharField(max_length=200)
    quantity = models.PositiveIntegerField(default=1)
    # On a league board (docs/leagues.md), ranks are ranks within a cohort, and a tier naming a
    # league tier pays only that tier's cohorts (a gold winner gets more); one without pays
    # every tier's cohorts at the ranks no tier of their own covers. Empty elsewhere.
    league_tier = models.CharField(
        max_length=32,
        blank=True,
        default="",
        help_text="League boards only: pay only the cohorts of this league tier (e.g. gold); "
        "empty: every tier.",
    )

    class Meta:
        db_table = "seasons_rewardtier"
        ordering = ["season", "board", "rank_from"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(rank_from__gte=1), name="reward_tier_rank_from_positive"
            ),
            models.CheckConstraint(
                condition=models.Q(rank_to__gte=models.F("rank_from")),
                name="reward_tier_rank_to_not_before_from",
            ),
            models.CheckConstraint(
                condition=models.Q(quantity__gte=1), name="reward_tier_quantity_positive"
            ),
            # Two tiers of one board never share a rank (needs btree_gist for the "=" part).
            ExclusionConstraint(
                name="reward_tier_board_no_overlap",
                expressions=[
                    ("board", RangeOperators.EQUAL),
                    ("league_tier", RangeOperators.EQUAL),
                    (
                        models.Func(
                            models.F("rank_from"),
                            models.F("rank_to"),
                            models.Value("[]"),
                            function="int4range",
                            output_field=IntegerRangeField(),
                        ),
                        RangeOperators.OVERLAPS,
                    ),
                ],
            ),
        ]

    def __str__(self) -> str:
        return f"ranks {self.rank_from}-{self.rank_to}: {self.quantity} x {self.reward_name}"

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if (
            self.board_id is not None
            and self.season_id is not None
            and self.board.season_id != self.season_id
        ):
            errors["board"] = f"board {self.board.slug!r} is not a board of this season"
        if self.rank_from is not None and self.rank_from < 1:
            errors["rank_from"] = "Ranks start at 1."
        if self.rank_from is not None and self.rank_to is not None:
            if self.rank_to < self.rank_from:
                errors["rank_to"] = "rank_to must be at least rank_from."
            elif self.board_id is not None and not errors:
                overlapping = (
                    RewardTier.objects.filter(
                        board_id=self.board_id,
                        league_tier=self.league_tier,
                        rank_from__lte=self.rank_to,
                        rank_to__gte=self.rank_from,
                    )
                    .exclude(pk=self.pk)
                    .first()
                )
                if overlapping is not None:
                    errors["rank_from"] = (
                        f"ranks {self.rank_from}-{self.rank_to} overlap the tier "
                        f"{overlapping.rank_from}-{overlapping.rank_to} ({overlapping.reward_name})"
                    )
        if self.league_tier and self.board_id is not None and "board" not in errors:
            problem = _league_tier_problem(self.board, self.league_tier)
            if problem:
                errors["league_tier"] = problem
        if (
            self.rank_to is not None
            and self.board_id is not None
            and not errors
            and self.rank_to > settings.FINAL_STANDINGS_SIZE
            and not _ranks_within_cohorts(self.board)
        ):
            # Grants are cut from the final standings, which keep the top FINAL_STANDINGS_SIZE:
            # a tier past them would pay its first ranks only, or nobody, without a word.
            errors["rank_to"] = (
                f"the close-out keeps the top {settings.FINAL_STANDINGS_SIZE} of a board "
                f"(FINAL_STANDINGS_SIZE) and pays tiers from them: rank_to may not pass it"
            )
        if errors:
            raise ValidationError(errors)


def _ranks_within_cohorts(board: Board) -> bool:
    """Whether the board's tiers pay ranks within a cohort (a league board, or a league
    schedule's template board), not ranks on the whole board."""
    if board.tiers:
        return True
    return board.cohort_size is not None and any(
        Schedule.objects.filter(template_season_id=board.season_id).values_list("tiers", flat=True)
    )


def _league_tier_problem(board: Board, league_tier: str) -> str:
    """Why ``league_tier`` cannot name a tier of ``board``'s league ("" if it can): the board is
    a league board with that tier, or a template board copied to one by a league schedule."""
    if board.tiers:
        if league_tier in board.tiers:
            return ""
        return f"board {board.slug!r} has tiers {', '.join(board.tiers)}, not {league_tier!r}"
    if board.cohort_size is not None and any(
        league_tier in tiers
        for tiers in Schedule.objects.filter(template_season_id=board.season_id).values_list(
            "tiers", flat=True
        )
    ):
        return ""
    return (
        f"board {board.slug!r} is not a league board (nor a league schedule's template board "
        f"with cohorts) with a tier {league_tier!r}"
    )


class FinalStanding(models.Model):
    """A board's final entry, copied into PostgreSQL at close-out (the top N only)."""

    season = models.ForeignKey(Season, on_delete=models.CASCADE, related_name="final_standings")
    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="final_standings")
    rank = models.PositiveIntegerField()
    player_id = models.BigIntegerField()
    points = models.BigIntegerField()
    # The moment the board credits the score to (season start + whole ticks), as the board shows.
    reached_at = models.DateTimeField()
    # On a board that keeps metadata, the deciding result's (contract 0.3); null elsewhere.
    metadata = models.JSONField(null=True, blank=True)
    # On a board with tie-break columns, the value of each column by name (contract 0.3);
    # null elsewhere.
    tiebreakers = models.JSONField(null=True, blank=True)
    # On a board with max-attempts, the player's attempts at close-out (contract 0.3); null
    # elsewhere. Stored, not counted when read: the match results it counts are pruned
    # MATCH_RESULTS_RETENTION_DAYS later.
    attempts = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        db_table = "seasons_finalstanding"
        ordering = ["season", "board", "rank"]
        constraints = [
            models.UniqueConstraint(fields=["board", "rank"], name="final_standing_board_rank"),
            models.UniqueConstraint(
                fields=["board", "player_id"], name="final_standing_board_player"
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.rank} player {self.player_id}: {self.points}"


class GrantStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    DELIVERED = "delivered", "Delivered"
    REVOKED = "revoked", "Revoked"


class RewardGrant(models.Model):
    """One player's reward from one board; the tier's name and quantity are copied at grant
    time so a later tier edit never rewrites what was granted."""

    season = models.ForeignKey(Season, on_delete=models.CASCADE, related_name="reward_grants")
    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="reward_grants")
    tier = models.ForeignKey(
        RewardTier, on_delete=models.SET_NULL, null=True, blank=True, related_name="grants"
    )
    player_id = models.BigIntegerField()
    rank = models.PositiveIntegerField()
    reward_name = models.CharField(max_length=200)
    quantity = models.PositiveIntegerField()
    status = models.CharField(
        max_length=16, choices=GrantStatus.choices, default=GrantStatus.PENDING
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "seasons_rewardgrant"
        ordering = ["season", "board", "rank"]
        constraints = [
            # At most one grant per player and board: what makes a second close-out grant nothing.
            models.UniqueConstraint(
                fields=["board", "player_id"], name="reward_grant_board_player"
            ),
        ]

    def __str__(self) -> str:
        return f"player {self.player_id} (#{self.rank}): {self.quantity} x {self.reward_name}"


class HistoryEntry(models.Model):
    """One player's final entry on one board of a closed season, for every player (not only the
    top FINAL_STANDINGS_SIZE): what ``GET /api/players/{player}/history`` lists. Archived from
    PostgreSQL after the close-out (closeout/services/history.py), pruned after
    HISTORY_RETENTION_DAYS."""

    season = models.ForeignKey(Season, on_delete=models.CASCADE, related_name="history")
    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="history")
    player_id = models.BigIntegerField()
    # As the final standings rank: the board's order, then the lower player id on an exact tie.
    rank = models.PositiveIntegerField()
    points = models.BigIntegerField()
    total = models.PositiveIntegerField()  # players on the board
    # The reward granted for this rank, copied from the grant; null without one.
    reward_name = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    reward_quantity = models.PositiveIntegerField(null=True, blank=True)
    # The season's end, copied: the history lists newest first without a join to sort by.
    season_ends_at = models.DateTimeField()
    # On a league board: the tier the player played in (its name) and how they left it (the
    # board's LeagueMovement); null elsewhere.
    tier = models.CharField(max_length=32, null=True, blank=True)  # noqa: DJ001
    movement = models.CharField(  # noqa: DJ001
        max_length=16, choices=Movement.choices, null=True, blank=True
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["board", "player_id"], name="history_board_player"),
        ]
        indexes = [
            # A player's history, newest first: an index scan, whatever the table's size.
            models.Index(
                fields=["player_id", "-season_ends_at", "season"], name="history_player_newest"
            ),
            # Retention prunes by the season's end.
            models.Index(fields=["season_ends_at"], name="history_season_end"),
        ]

    def __str__(self) -> str:
        return f"player {self.player_id}: #{self.rank} of {self.total} on board {self.board_id}"


class HistoryArchive(models.Model):
    """That one board's history is archived (written in the same transaction as its rows): the
    close-out's sweep archives every closed board without one."""

    board = models.OneToOneField(Board, on_delete=models.CASCADE, related_name="history_archive")
    season = models.ForeignKey(Season, on_delete=models.CASCADE, related_name="history_archives")
    rows = models.PositiveIntegerField()
    seconds = models.FloatField()
    archived_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"board {self.board_id}: {self.rows} players archived"


class FinalEventsSent(models.Model):
    """That one board's season_final rank events are on Kafka (docs/events.md): the close-out's
    sweep publishes them for every closed board with rank events and without one."""

    board = models.OneToOneField(Board, on_delete=models.CASCADE, related_name="final_events")
    season = models.ForeignKey(Season, on_delete=models.CASCADE, related_name="final_events")
    events = models.PositiveIntegerField()
    sent_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"board {self.board_id}: {self.events} season_final events sent"
