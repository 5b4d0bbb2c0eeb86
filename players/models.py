"""A player's public profile: the name and country the boards show, and staff moderation.

A player is an external integer id (the game's account id); the profile is keyed by it and
exists only once a game server sent one (the ``player-profiles`` topic, ``PUT
/api/players/{player}/profile``, or a match result's ``displayName``).

Two groups of fields move on their own clocks, so that the latest ``updatedAt`` wins whatever
the delivery order (players/services.py): the name (``display_name``, ``name_updated_at``),
which a full profile and a match result's ``displayName`` both set, and the rest of the profile
(``country``, ``avatar_url``, ``updated_at``), which only a full profile sets.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import models
from django.db.models.functions import Now


class PlayerProfile(models.Model):
    player_id = models.BigIntegerField(primary_key=True)
    # 1-32 characters after NFC normalization (players/schema.py checks it on the way in).
    display_name = models.CharField(max_length=32)
    # When the game last set the name: a full profile's updatedAt, or a match result's
    # achievedAt.
    name_updated_at = models.DateTimeField()
    # Null, not "": the contract's null, and what the API answers.
    country = models.CharField(max_length=2, null=True, blank=True)  # noqa: DJ001
    avatar_url = models.CharField(max_length=512, null=True, blank=True)  # noqa: DJ001
    # The updatedAt of the full profile that set country and avatarUrl; null while the player's
    # name came only from match results.
    updated_at = models.DateTimeField(null=True, blank=True)
    # Staff moderation: a hidden name reads null everywhere until unhidden; profile updates
    # never change it.
    hidden = models.BooleanField(default=False)
    hidden_at = models.DateTimeField(null=True, blank=True)
    hidden_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    # Raised by every change of the row (an update that wins, a hide, an unhide): the name
    # cache in Redis keeps a field only for a higher revision than it holds, so two writers
    # racing (a consumer and a staff hide) never leave the older state in it.
    revision = models.BigIntegerField(default=1)
    created_at = models.DateTimeField(db_default=Now(), editable=False)
    changed_at = models.DateTimeField(db_default=Now(), editable=False)

    class Meta:
        db_table = "player_profiles"
        # Also an index on UPPER(display_name) text_pattern_ops for the admin's search by name
        # (a case-insensitive prefix, whatever the collation), created in SQL by migration 0001:
        # Django cannot express an operator class on an expression index yet.
        constraints = [
            models.CheckConstraint(
                condition=models.Q(player_id__gte=1), name="player_profile_id_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"player {self.player_id}: {self.display_name}"

    @property
    def visible_name(self) -> str | None:
        """The name as every read shows it: null while staff hide it."""
        return None if self.hidden else self.display_name

    @property
    def profile_updated_at(self) -> datetime:
        """The latest updatedAt the stored profile holds (name or the rest)."""
        if self.updated_at is None or self.name_updated_at > self.updated_at:
            return self.name_updated_at
        return self.updated_at
