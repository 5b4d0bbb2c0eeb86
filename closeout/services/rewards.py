"""Reward tiers and the status of grants."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction

from seasons.models import Season, SeasonStatus

from ..models import GrantStatus, RewardGrant, RewardTier


@transaction.atomic
def reward_tier_create(
    *, season_id: int, rank_from: int, rank_to: int, reward_name: str, quantity: int = 1
) -> RewardTier:
    """Add a tier; ranks start at 1, rank_from <= rank_to, and tiers of a season never overlap
    (checked here with the season locked, and by an exclusion constraint in the database)."""
    season = Season.objects.select_for_update(no_key=True).filter(id=season_id).first()
    if season is None:
        raise ValidationError(f"season {season_id} does not exist")
    if season.status == SeasonStatus.CLOSED:
        raise ValidationError(f"season {season_id} is closed; its rewards were granted")
    tier = RewardTier(
        season=season,
        rank_from=rank_from,
        rank_to=rank_to,
        reward_name=reward_name,
        quantity=quantity,
    )
    tier.full_clean()
    tier.save(force_insert=True)
    return tier


def reward_grant_status_set(*, grant_id: int, status: str) -> RewardGrant:
    if status not in GrantStatus.values:
        raise ValidationError(f"status must be one of {', '.join(GrantStatus.values)}")
    grant = RewardGrant.objects.get(id=grant_id)
    if grant.status != status:
        grant.status = status
        grant.save(update_fields=["status", "updated_at"])
    return grant
