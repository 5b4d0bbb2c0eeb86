from __future__ import annotations

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
