from __future__ import annotations

from datetime import datetime

from django.db import models
from django.utils import timezone


class SeasonStatus(models.TextChoices):
    SCHEDULED = "scheduled", "Scheduled"
    ACTIVE = "active", "Active"
    CLOSING = "closing", "Closing"
    CLOSED = "closed", "Closed"


class Season(models.Model):
    # Game servers and clients name seasons by number, so the id is chosen, not generated.
    id = models.PositiveIntegerField(primary_key=True)
    name = models.CharField(max_length=200)
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    status = models.CharField(
        max_length=16, choices=SeasonStatus.choices, default=SeasonStatus.SCHEDULED
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)
    closed_at = models.DateTimeField(null=True, blank=True, editable=False)
    # When the season stopped taking results: the drain grace of close-out counts from here.
    closing_since = models.DateTimeField(null=True, blank=True, editable=False)
    # The match-results topic's end offsets when the close-out began waiting for the drain:
    # {"topic": ..., "recorded_at": ISO 8601, "partitions": {"<partition>": <end offset>}}.
    # The close-out finalizes only once the consumer group committed up to them (seasons/services).
    drain_end_offsets = models.JSONField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-starts_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(ends_at__gt=models.F("starts_at")),
                name="season_ends_after_start",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} (#{self.id})"

    def contains(self, moment: datetime) -> bool:
        return self.starts_at <= moment <= self.ends_at
