from __future__ import annotations

from datetime import datetime
from functools import cache

from django.db import models
from django.utils import timezone

from leaderboard.codec import ScoreCodec


class ScoringRule(models.TextChoices):
    BEST = "best", "Best single match"
    CUMULATIVE = "cumulative", "Sum over matches"


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
    rule = models.CharField(max_length=16, choices=ScoringRule.choices, default=ScoringRule.BEST)
    time_resolution_seconds = models.PositiveIntegerField(
        default=1, help_text="Tie-break granularity: equal points reached in one tick tie."
    )
    # Fixed at creation: the encoded scores on the board depend on it, so it never changes
    # while the season has scores (see leaderboard/codec.py).
    time_bits = models.PositiveSmallIntegerField(editable=False)
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
            models.CheckConstraint(
                condition=models.Q(time_resolution_seconds__gte=1),
                name="season_time_resolution_positive",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} (#{self.id})"

    @property
    def codec(self) -> ScoreCodec:
        return _codec(self.time_bits, self.time_resolution_seconds)

    def contains(self, moment: datetime) -> bool:
        return self.starts_at <= moment <= self.ends_at


@cache
def _codec(time_bits: int, resolution_seconds: int) -> ScoreCodec:
    # Codecs are immutable and few: ingestion asks for one per result, and building a fresh one
    # (its bounds checks) each time was a tenth of the consumer's CPU per result.
    return ScoreCodec(
        points_bits=53 - time_bits, time_bits=time_bits, resolution_seconds=resolution_seconds
    )
