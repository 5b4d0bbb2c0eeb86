from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


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
