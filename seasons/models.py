from __future__ import annotations

from datetime import datetime

from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, RegexValidator
from django.db import models
from django.utils import timezone

from .cron import CronError, cron_check, timezone_check
from .leagues import league_spec_check

# Schedule has a field named timezone, which would shadow the module in its class body.
_now = timezone.now


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
    # When the last of the closed season's match results was deleted, MATCH_RESULTS_RETENTION_DAYS
    # after its close-out (closeout/services/retention.py): its final standings, grants and
    # players' history stay; corrections can no longer re-rank it.
    results_pruned_at = models.DateTimeField(null=True, blank=True, editable=False)
    # When the closed season's Redis keys were unlinked; null on a closed season: its
    # close-out stopped between its commit and the unlink (a worker killed), and the close-out
    # sweep unlinks them (closeout/tasks.py).
    keys_released_at = models.DateTimeField(null=True, blank=True, editable=False)
    # A season a schedule started (contract 0.3): the schedule and the number of its cron
    # occurrence (1 = the first tick after the schedule's starts_from). Null on seasons staff
    # created by hand.
    schedule = models.ForeignKey(
        "Schedule", on_delete=models.PROTECT, null=True, blank=True, related_name="seasons"
    )
    occurrence = models.PositiveIntegerField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-starts_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(ends_at__gt=models.F("starts_at")),
                name="season_ends_after_start",
            ),
            # What makes an occurrence's season exist at most once, whoever creates it (two
            # beats, a retry after a crash).
            models.UniqueConstraint(
                fields=["schedule", "occurrence"], name="season_schedule_occurrence"
            ),
            models.CheckConstraint(
                condition=models.Q(schedule__isnull=True, occurrence__isnull=True)
                | models.Q(schedule__isnull=False, occurrence__gte=1),
                name="season_occurrence_with_schedule",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} (#{self.id})"

    def contains(self, moment: datetime) -> bool:
        return self.starts_at <= moment <= self.ends_at


# A schedule's slug: its name in URLs and filters.
SCHEDULE_SLUG_PATTERN = r"^[a-z0-9][a-z0-9-]{0,31}$"


class Schedule(models.Model):
    """A competition that recurs (contract 0.3): each occurrence of ``cron`` in ``timezone``
    starts a season that ends at the next occurrence, with the template season's boards and
    reward tiers, created ``lead_minutes`` before it starts (closeout/services/schedules.py)."""

    slug = models.CharField(
        max_length=32,
        unique=True,
        validators=[
            RegexValidator(
                SCHEDULE_SLUG_PATTERN, "1 to 32 of a-z, 0-9 and '-', not starting with '-'"
            )
        ],
    )
    name = models.CharField(max_length=200)
    cron = models.CharField(
        max_length=100, help_text="5 fields: minute hour day-of-month month day-of-week"
    )
    timezone = models.CharField(
        max_length=64, default="UTC", help_text="An IANA time zone, e.g. Europe/Paris"
    )
    # Each new season copies this season's boards and reward tiers.
    template_season = models.ForeignKey(
        Season, on_delete=models.PROTECT, related_name="template_of_schedules"
    )
    lead_minutes = models.PositiveIntegerField(
        default=60, help_text="How long before it starts each season is created"
    )
    # A paused schedule creates no season; the seasons it created run and close as usual.
    active = models.BooleanField(default=True)
    # Occurrence 1 is the first tick after this moment.
    starts_from = models.DateTimeField(default=_now)
    # How far the schedule got: the last occurrence handled (its season created, or skipped)
    # and its tick. The next run iterates from there.
    last_occurrence = models.PositiveIntegerField(default=0, editable=False)
    last_occurrence_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Occurrences whose whole season had passed before any run reached them (beat down): not
    # created (docs/schedules.md says why).
    occurrences_skipped = models.PositiveIntegerField(default=0, editable=False)
    # A tiered league (contract 0.3, docs/leagues.md): its tiers, lowest first, and the percent
    # of each cohort that moves up and down one tier at each close-out. Copied onto the league
    # boards of each season created from now on (its boards with cohorts); empty: no league.
    tiers = ArrayField(
        models.CharField(max_length=32),
        default=list,
        blank=True,
        help_text="League tiers, lowest first (e.g. bronze, silver, gold); empty: no league.",
    )
    promote_percent = models.PositiveSmallIntegerField(
        default=0,
        validators=[MaxValueValidator(100)],
        help_text="Percent of each cohort moving up one tier at each close-out.",
    )
    relegate_percent = models.PositiveSmallIntegerField(
        default=0,
        validators=[MaxValueValidator(100)],
        help_text="Percent of each cohort moving down one tier at each close-out.",
    )
    created_at = models.DateTimeField(default=_now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(promote_percent__lte=100, relegate_percent__lte=100)
                & models.Q(
                    promote_percent__lte=100 - models.F("relegate_percent"),
                ),
                name="schedule_league_percents",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.slug})"

    def clean(self) -> None:
        errors: dict[str, str] = {}
        try:
            cron_check(self.cron)
        except CronError as exc:
            errors["cron"] = str(exc)
        try:
            timezone_check(self.timezone)
        except CronError as exc:
            errors["timezone"] = str(exc)
        try:
            league_spec_check(
                tiers=self.tiers or (),
                promote_percent=self.promote_percent,
                relegate_percent=self.relegate_percent,
            )
        except ValidationError as exc:
            errors["tiers"] = "; ".join(exc.messages)
        if errors:
            raise ValidationError(errors)
