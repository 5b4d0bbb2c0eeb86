"""Writes of player profiles: the batch upsert (latest updatedAt wins), staff hide and unhide.

``player_profiles_upsert`` is one SQL statement per batch (``INSERT ... ON CONFLICT DO UPDATE``)
and idempotent: a profile applies only where it is later than what is stored, so a redelivery,
a retry or an older profile delivered after a newer one changes nothing. Each group of fields
compares its own time (players/models.py): the name at the later of its ``updatedAt`` and the
match results' ``achievedAt``, country and avatarUrl at the later full profile's ``updatedAt``.
An exact tie between two different updates goes to the greater value (code-point order), so
the outcome never depends on delivery order. ``hidden`` is never touched by an update.

Every write ends by sending ``players.signals.profiles_changed`` once the transaction commits
(with every player id of the call, changed or not: a retry after the cache write failed must
write it again); the leaderboard app keeps its name cache in Redis from it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from .models import PlayerProfile
from .schema import ProfileUpdate
from .signals import profiles_changed

logger = logging.getLogger(__name__)

_TABLE = PlayerProfile._meta.db_table

# COLLATE "C": ties compare by code point, as Python's str does in _Row.merge. Only constants
# are formatted in; the values travel as parameters.
_UPSERT = f"""
INSERT INTO {_TABLE} AS p (
    player_id, display_name, name_updated_at, country, avatar_url, updated_at,
    hidden, revision, created_at, changed_at
)
SELECT u.player_id, u.display_name, u.name_updated_at, u.country, u.avatar_url, u.updated_at,
       false, 1, now(), now()
FROM unnest(
    %s::bigint[], %s::text[], %s::timestamptz[], %s::text[], %s::text[], %s::timestamptz[]
) AS u(player_id, display_name, name_updated_at, country, avatar_url, updated_at)
ON CONFLICT (player_id) DO UPDATE SET
    display_name = CASE WHEN {{name_wins}} THEN EXCLUDED.display_name ELSE p.display_name END,
    name_updated_at = CASE WHEN {{name_wins}} THEN EXCLUDED.name_updated_at
                           ELSE p.name_updated_at END,
    country = CASE WHEN {{rest_wins}} THEN EXCLUDED.country ELSE p.country END,
    avatar_url = CASE WHEN {{rest_wins}} THEN EXCLUDED.avatar_url ELSE p.avatar_url END,
    updated_at = CASE WHEN {{rest_wins}} THEN EXCLUDED.updated_at ELSE p.updated_at END,
    revision = p.revision + 1,
    changed_at = now()
WHERE {{name_wins}} OR {{rest_wins}}
""".format(  # noqa: S608
    name_wins=(
        '((EXCLUDED.name_updated_at, EXCLUDED.display_name COLLATE "C")'
        ' > (p.name_updated_at, p.display_name COLLATE "C"))'
    ),
    # EXCLUDED.updated_at is null for a name-only update: the comparison is null, never true.
    rest_wins=(
        "(EXCLUDED.updated_at IS NOT NULL AND (p.updated_at IS NULL OR"
        " (EXCLUDED.updated_at, COALESCE(EXCLUDED.country, '') COLLATE \"C\","
        " COALESCE(EXCLUDED.avatar_url, '') COLLATE \"C\")"
        " > (p.updated_at, COALESCE(p.country, '') COLLATE \"C\","
        " COALESCE(p.avatar_url, '') COLLATE \"C\")))"
    ),
)


class _Row:
    """One player's merged updates of a batch (the statement may touch each row once)."""

    __slots__ = ("avatar_url", "country", "display_name", "name_at", "rest_at")

    def __init__(self, update: ProfileUpdate) -> None:
        self.display_name = update.display_name
        self.name_at = update.updated_at
        self.country = update.country if update.full else None
        self.avatar_url = update.avatar_url if update.full else None
        self.rest_at: datetime | None = update.updated_at if update.full else None

    def merge(self, update: ProfileUpdate) -> None:
        # The same rule as the statement, so a batch ends as its updates one by one would.
        if (update.updated_at, update.display_name) > (self.name_at, self.display_name):
            self.display_name, self.name_at = update.display_name, update.updated_at
        if update.full and (
            self.rest_at is None
            or (update.updated_at, update.country or "", update.avatar_url or "")
            > (self.rest_at, self.country or "", self.avatar_url or "")
        ):
            self.country, self.avatar_url = update.country, update.avatar_url
            self.rest_at = update.updated_at


def _changed(player_ids: list[int]) -> None:
    if player_ids:
        transaction.on_commit(
            lambda: profiles_changed.send(sender=PlayerProfile, player_ids=player_ids)
        )


def player_profiles_upsert(*, profiles: Sequence[ProfileUpdate]) -> int:
    """Store a batch of updates, each only where it is later than the stored profile.

    Returns the number of profiles inserted or changed (0 on a redelivery)."""
    rows: dict[int, _Row] = {}
    for update in profiles:
        row = rows.get(update.player_id)
        if row is None:
            rows[update.player_id] = _Row(update)
        else:
            row.merge(update)
    if not rows:
        return 0
    ids = sorted(rows)  # one lock order for every writer: no deadlock between two batches
    merged = [rows[i] for i in ids]
    with connection.cursor() as cursor:
        cursor.execute(
            _UPSERT,
            [
                ids,
                [r.display_name for r in merged],
                [r.name_at for r in merged],
                [r.country for r in merged],
                [r.avatar_url for r in merged],
                [r.rest_at for r in merged],
            ],
        )
        changed = cursor.rowcount
    _changed(ids)
    return changed


def player_profile_hide(*, player_id: int, by: AbstractBaseUser | None = None) -> bool:
    """Hide the player's name everywhere (staff moderation); False if there is no profile.

    Hiding a hidden profile changes nothing (its hidden_at and hidden_by stay)."""
    return _visibility_set(
        player_id=player_id,
        hidden=True,
        hidden_at=timezone.now(),
        hidden_by=by if by is not None and by.pk is not None else None,
    )


def player_profile_unhide(*, player_id: int) -> bool:
    """Show the player's name again; False if there is no profile."""
    return _visibility_set(player_id=player_id, hidden=False, hidden_at=None, hidden_by=None)


def _visibility_set(
    *,
    player_id: int,
    hidden: bool,
    hidden_at: datetime | None,
    hidden_by: AbstractBaseUser | None,
) -> bool:
    """Set ``hidden`` where it differs (a new revision, so the name cache follows); False if
    there is no profile.

    The name cache is written inside the transaction, not after its commit: a cache write
    that fails (Redis away) raises and undoes the change, so staff see the error and retry.
    Written after the commit, a failure left the profile hidden in PostgreSQL and the name on
    every board: nothing rewrites a cache entry whose revision only PostgreSQL moved.

    A cache write that Redis applied but whose reply was lost (a timeout) undoes the change in
    PostgreSQL while the cache holds it at the next revision: the next change of the row would
    bring PostgreSQL to that same revision, which the cache refuses as not newer, and the name
    would stay as the undone change left it (shown while PostgreSQL hides it, after a failed
    hide). So after a failure the row's revision is moved past it and the cache rewritten from
    the row, when Redis answers."""
    try:
        with transaction.atomic():
            exists = PlayerProfile.objects.filter(player_id=player_id)
            updated = exists.filter(hidden=not hidden).update(
                hidden=hidden,
                hidden_at=hidden_at,
                hidden_by=hidden_by,
                revision=F("revision") + 1,
                changed_at=timezone.now(),
            )
            found = bool(updated) or exists.exists()
            if found:
                profiles_changed.send(sender=PlayerProfile, player_ids=[player_id])
    except Exception:
        _revision_supersede(player_id=player_id)
        raise
    return found


def _revision_supersede(*, player_id: int) -> None:
    """Move the row's revision two past what it holds (past a revision the cache may hold of
    an undone change) and write the cache from the row; a failure is left to the next try."""
    try:
        with transaction.atomic():
            moved = PlayerProfile.objects.filter(player_id=player_id).update(
                revision=F("revision") + 2, changed_at=timezone.now()
            )
            if moved:
                profiles_changed.send(sender=PlayerProfile, player_ids=[player_id])
    except Exception:
        logger.warning(
            "player %s: the name cache may hold a visibility change that was undone; it is "
            "rewritten at the next change of the profile",
            player_id,
            exc_info=True,
        )
