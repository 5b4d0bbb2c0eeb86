"""What a tiered league is made of (contract 0.3): its tiers, lowest first, and the share of each
cohort that moves up and down at a close-out. A schedule holds one (seasons.models.Schedule)
and copies it onto each league board it creates (leaderboard.models.Board); this module checks
it, wherever it comes from (the command line, the admin, a service call)."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import models

TIER_NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,31}$"
TIERS_MIN = 2
TIERS_MAX = 10


class Movement(models.TextChoices):
    """How a player leaves a league season: up one tier, down one, or in the same one."""

    PROMOTED = "promoted", "Promoted"
    RELEGATED = "relegated", "Relegated"
    STAYED = "stayed", "Stayed"


@dataclass(frozen=True, slots=True)
class LeagueSpec:
    tiers: tuple[str, ...]  # lowest first; () for no league
    promote_percent: int = 0
    relegate_percent: int = 0

    @property
    def is_league(self) -> bool:
        return bool(self.tiers)


NO_LEAGUE = LeagueSpec(())


def league_tiers_parse(raw: str) -> tuple[str, ...]:
    """``bronze,silver,gold`` as tier names (blanks around the commas ignored)."""
    return tuple(name.strip() for name in raw.split(",")) if raw.strip() else ()


def league_spec_check(
    *, tiers: Sequence[str], promote_percent: int | None, relegate_percent: int | None
) -> LeagueSpec:
    """The league of ``tiers`` (lowest first) moving ``promote_percent`` of each cohort up and
    ``relegate_percent`` down, checked; NO_LEAGUE for no tiers (and then no percentages)."""
    tiers = tuple(tiers)
    promote, relegate = promote_percent or 0, relegate_percent or 0
    if not tiers:
        if promote or relegate:
            raise ValidationError("--promote and --relegate need --tiers (a league)")
        return NO_LEAGUE
    if not TIERS_MIN <= len(tiers) <= TIERS_MAX:
        raise ValidationError(
            f"a league has {TIERS_MIN} to {TIERS_MAX} tiers, lowest first; got {len(tiers)}"
        )
    for name in tiers:
        if not re.fullmatch(TIER_NAME_PATTERN, name):
            raise ValidationError(
                f"tier name {name!r}: 1 to 32 of a-z, 0-9 and '-', not starting with '-'"
            )
    if len(set(tiers)) != len(tiers):
        raise ValidationError(f"tier names repeat: {', '.join(tiers)}")
    for label, value in (("promote", promote), ("relegate", relegate)):
        if not 0 <= value <= 100:
            raise ValidationError(f"--{label} is a percent of a cohort: 0 to 100, got {value}")
    if promote + relegate > 100:
        raise ValidationError(
            f"--promote {promote} and --relegate {relegate} add up to more than a cohort (100)"
        )
    return LeagueSpec(tiers, promote, relegate)


def league_movement(
    *, rank: int, players: int, tier: int, tiers: int, promote_percent: int, relegate_percent: int
) -> str:
    """How a player ranked ``rank`` in a cohort of ``players`` (members with a score; equal keys
    share a rank) of ``tier`` (a position among ``tiers``) leaves the season: the rule the
    close-out applies in SQL (closeout/services/leagues.py), stated once more for reads that
    show it before the close (docs/leagues.md, "The rule").

    floor(players x promote% / 100) move up and floor(players x relegate% / 100) down, never
    past the ends; a tie at the promotion boundary goes up whole, one at the relegation
    boundary stays unless all of it is within the bottom share."""
    return league_movements(
        ranks=[rank],
        players=players,
        tier=tier,
        tiers=tiers,
        promote_percent=promote_percent,
        relegate_percent=relegate_percent,
    )[0]


def league_movements(
    *,
    ranks: Sequence[int],
    players: int,
    tier: int,
    tiers: int,
    promote_percent: int,
    relegate_percent: int,
) -> list[str]:
    """``league_movement`` for each of ``ranks``, the boundaries computed once: a cohort read
    states it for every entry."""
    # Past the ends nobody moves: a top tier's boundary promotes no rank, a bottom tier's
    # relegates none.
    promoted_to = players * promote_percent // 100 if tier < tiers - 1 else 0
    relegated_after = players - players * relegate_percent // 100 if tier > 0 else sys.maxsize
    promoted, relegated, stayed = Movement.PROMOTED, Movement.RELEGATED, Movement.STAYED
    return [
        promoted if rank <= promoted_to else relegated if rank > relegated_after else stayed
        for rank in ranks
    ]
