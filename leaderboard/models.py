from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class MatchResult(models.Model):
    """One player's result in one match: the source of truth every board is rebuilt from.

    ``(match_id, player_id)`` is unique: ingestion inserts with ON CONFLICT DO NOTHING, so a
    result delivered twice is stored once.
    """

    id = models.BigAutoField(primary_key=True)
    match_id = models.UUIDField()
    player_id = models.BigIntegerField()
    # No index of its own: match_result_player_idx leads with season_id and serves every
    # lookup by season, and one index less is one write less per ingested result. No
    # per-row constraint check either (a sixth of PostgreSQL's CPU per result): ingestion
    # locks the batch's seasons once per batch instead, and a trigger refuses deleting a season
    # that has results (migration 0006 says how the guarantee is kept).
    season = models.ForeignKey(
        "seasons.Season",
        on_delete=models.PROTECT,
        related_name="match_results",
        db_index=False,
        db_constraint=False,
    )
    points = models.BigIntegerField()
    achieved_at = models.DateTimeField()
    ingested_at = models.DateTimeField(default=timezone.now)
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
                fields=["match_id", "player_id"], name="match_result_match_player_uniq"
            ),
            models.CheckConstraint(
                condition=models.Q(points__gte=0), name="match_result_points_non_negative"
            ),
        ]
        indexes = [
            # The rebuild's DISTINCT ON (player_id) ... ORDER BY player_id, points DESC,
            # achieved_at reads this index in order, no sort. voided_at is carried in it, so
            # the aggregation (which skips voided results) never visits the table: an
            # index-only scan, about 3x faster at 20M rows than fetching each row's voided_at.
            # Not partial on the counted rows: staff look results up by season and player,
            # voided ones included.
            models.Index(
                fields=["season", "player_id", "-points", "achieved_at"],
                name="match_result_player_idx",
                include=["voided_at"],
            ),
        ]

    def __str__(self) -> str:
        return f"match {self.match_id} player {self.player_id}: {self.points}"


class PlayerBan(models.Model):
    """A player excluded from one season: none of their results count on its boards."""

    season = models.ForeignKey("seasons.Season", on_delete=models.CASCADE, related_name="bans")
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
    """One rebuild of one board (the season's, or one UTC day's), for audit and timing."""

    season = models.ForeignKey("seasons.Season", on_delete=models.CASCADE, related_name="rebuilds")
    day = models.DateField(null=True, blank=True, help_text="Empty: the season board.")
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
        board = self.day.isoformat() if self.day else "season"
        return f"rebuild of season {self.season_id} {board}: {self.status}"


class ReconcileRun(models.Model):
    """One comparison of a board in Redis against PostgreSQL, with the drift it found."""

    season = models.ForeignKey(
        "seasons.Season", on_delete=models.CASCADE, related_name="reconciles"
    )
    day = models.DateField(null=True, blank=True, help_text="Empty: the season board.")
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
        return f"reconcile of season {self.season_id} at {self.checked_at:%Y-%m-%d %H:%M}: {state}"
