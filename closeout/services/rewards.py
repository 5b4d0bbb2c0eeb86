"""Reward tiers and the status of grants."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction

from leaderboard.models import MAIN_BOARD, Board
from seasons.models import Season, SeasonStatus

from ..models import GrantStatus, RewardGrant, RewardTier


@transaction.atomic
def reward_tier_create(
    *,
    season_id: int,
    rank_from: int,
    rank_to: int,
    reward_name: str,
    quantity: int = 1,
    board_slug: str = MAIN_BOARD,
    league_tier: str = "",
) -> RewardTier:
    """Add a tier to a board; ranks start at 1, rank_from <= rank_to, and tiers of a board never
    overlap (checked here with the season locked, and by an exclusion constraint in the
    database). ``league_tier``: on a league board (or a league schedule's template board), pay
    only the cohorts of that league tier, by rank within the cohort (docs/leagues.md)."""
    season = Season.objects.select_for_update(no_key=True).filter(id=season_id).first()
    if season is None:
        raise ValidationError(f"season {season_id} does not exist")
    if season.status == SeasonStatus.CLOSED:
        raise ValidationError(f"season {season_id} is closed; its rewards were granted")
    board = Board.objects.filter(season_id=season_id, slug=board_slug).first()
    if board is None:
        raise ValidationError(f"season {season_id} has no board {board_slug!r}")
    tier = RewardTier(
        season=season,
        board=board,
        rank_from=rank_from,
        rank_to=rank_to,
        reward_name=reward_name,
        quantity=quantity,
        league_tier=league_tier,
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
