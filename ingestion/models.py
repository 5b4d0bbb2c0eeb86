from __future__ import annotations

from django.db import models
from django.utils import timezone


class GameServerToken(models.Model):
    """A credential for game servers that post results over HTTP instead of Kafka.

    Only a SHA-256 digest of the token is stored; the token is shown once, at creation.
    """

    name = models.CharField(max_length=200, unique=True)
    token_prefix = models.CharField(max_length=12, editable=False)
    token_digest = models.CharField(max_length=64, unique=True, editable=False)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    def __str__(self) -> str:
        return f"{self.name} ({self.token_prefix}…)"
