from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from closeout.models import RewardTier
from closeout.services import reward_tier_create
from tests.factories import SeasonFactory
from tests.helpers import main_board_id


@pytest.mark.django_db
def test_valid_tiers_are_created() -> None:
    season = SeasonFactory.create()
    reward_tier_create(season_id=season.id, rank_from=1, rank_to=1, reward_name="crown")
    reward_tier_create(season_id=season.id, rank_from=2, rank_to=10, reward_name="gems", quantity=5)
    # Another season may use the same ranks.
    other = SeasonFactory.create()
    reward_tier_create(season_id=other.id, rank_from=1, rank_to=10, reward_name="gems")
    assert [
        (t.rank_from, t.rank_to, t.reward_name, t.quantity)
        for t in RewardTier.objects.filter(season=season)
    ] == [(1, 1, "crown", 1), (2, 10, "gems", 5)]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("rank_from", "rank_to", "message"),
    [
        (0, 5, "Ranks start at 1"),
        (5, 4, "rank_to must be at least rank_from"),
        (10, 20, "overlap the tier 5-10"),
        (1, 5, "overlap the tier 5-10"),
        (6, 7, "overlap the tier 5-10"),
        (1, 100, "overlap the tier 5-10"),
    ],
)
def test_invalid_tiers_are_refused(rank_from: int, rank_to: int, message: str) -> None:
    season = SeasonFactory.create()
    reward_tier_create(season_id=season.id, rank_from=5, rank_to=10, reward_name="gems")
    with pytest.raises(ValidationError, match=message):
        reward_tier_create(
            season_id=season.id, rank_from=rank_from, rank_to=rank_to, reward_name="x"
        )
    assert RewardTier.objects.filter(season=season).count() == 1


@pytest.mark.django_db
def test_the_database_refuses_overlaps_and_bad_ranks_too() -> None:
    season = SeasonFactory.create()
    RewardTier.objects.create(
        season=season, board_id=main_board_id(season), rank_from=1, rank_to=10, reward_name="a"
    )
    for rank_from, rank_to in [(10, 12), (0, 0), (7, 3)]:
        with pytest.raises(IntegrityError), transaction.atomic():
            RewardTier.objects.create(
                season=season,
                board_id=main_board_id(season),
                rank_from=rank_from,
                rank_to=rank_to,
                reward_name="b",
            )
    RewardTier.objects.create(
        season=season, board_id=main_board_id(season), rank_from=11, rank_to=12, reward_name="b"
    )


@pytest.mark.django_db
def test_a_tier_past_the_final_standings_is_refused(settings) -> None:
    """Grants are cut from the final standings: a tier past FINAL_STANDINGS_SIZE would pay its
    first ranks only (or nobody) without a word."""
    settings.FINAL_STANDINGS_SIZE = 10
    season = SeasonFactory.create()
    reward_tier_create(season_id=season.id, rank_from=1, rank_to=10, reward_name="gems")
    for rank_from, rank_to in [(11, 11), (11, 5000)]:
        with pytest.raises(ValidationError, match="FINAL_STANDINGS_SIZE"):
            reward_tier_create(
                season_id=season.id, rank_from=rank_from, rank_to=rank_to, reward_name="x"
            )
    assert RewardTier.objects.filter(season=season).count() == 1
