from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone


class WebhookEndpoint(models.Model):
    """A receiver of rank events: where to POST them, the secret they are signed with, and
    which events it wants (docs/webhooks.md)."""

    name = models.CharField(max_length=200, blank=True)
    url = models.URLField(max_length=2000, help_text="http or https; POSTed JSON arrays of events.")
    # Fernet-encrypted (webhooks/crypto.py): the HMAC needs the secret itself, so it cannot be
    # hashed; shown once when set, never again.
    secret_encrypted = models.TextField(editable=False)
    # Event types it receives; empty: every type.
    event_types = models.JSONField(default=list, blank=True)
    # Boards it receives events of, as "<season>/<slug>"; empty: every board.
    boards = models.JSONField(default=list, blank=True)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.name or self.url


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "retrying"
    FAILED = "failed", "gave up"


class WebhookDelivery(models.Model):
    """A batch of events an endpoint does not have yet, kept in PostgreSQL: its POST failed (or
    the endpoint's queue was full) and it is retried with backoff until ``give_up_at``, then
    kept as failed for staff to resend or purge. A batch delivered is deleted."""

    # Sent as X-Leaderboard-Delivery, the same on every retry.
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries"
    )
    # The exact JSON array POSTed (the events as the write path published them).
    body = models.TextField()
    event_ids = models.JSONField(default=list)
    event_count = models.PositiveIntegerField()
    status = models.CharField(
        max_length=8, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    # When the oldest of its events was read from Kafka: the endpoint's lag.
    received_at = models.DateTimeField()
    created_at = models.DateTimeField()
    next_attempt_at = models.DateTimeField()
    give_up_at = models.DateTimeField()
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    # A deliverer trying it holds it until then (two deliverers never send one batch at once).
    lease_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "webhook deliveries"
        ordering = ["-created_at"]
        indexes = [
            models.Index(
                fields=["endpoint", "status", "next_attempt_at"], name="webhook_delivery_due_idx"
            )
        ]

    def __str__(self) -> str:
        return f"{self.event_count} event(s) for {self.endpoint_id} ({self.status})"
