"""Corrections of a closed season: standings and grants, reviewed before they apply."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction

from leaderboard.selectors.boards import BoardRef, board_list
from seasons.models import Season, SeasonStatus

from ..models import FinalStanding, GrantStatus, RewardGrant, RewardTier
from ..selectors import StandingRow, board_standings_compute
from .close_out import final_standings_replace
from .history import season_history_forget
from .retention import season_results_retained_require


@dataclass(frozen=True, slots=True)
class StandingChange:
    board: str  # the board's slug
    player_id: int
    old_rank: int | None
    new_rank: int | None
    old_points: int | None
    new_points: int | None


@dataclass(frozen=True, slots=True)
class GrantChange:
    board: str  # the board's slug
    player_id: int
    action: str  # "grant", "revoke", "reinstate", "change"
    old: str  # "#3 2 x gems (delivered)" or ""
    new: str


@dataclass(frozen=True, slots=True)
class StandingsReview:
    season_id: int
    standings: tuple[StandingChange, ...]
    grants: tuple[GrantChange, ...]
    # Identifies exactly these changes: applying checks it, so staff apply what they reviewed.
    fingerprint: str

    @property
    def has_changes(self) -> bool:
        return bool(self.standings or self.grants)


def _grant_label(*, rank: int, tier: RewardTier | None, name: str, quantity: int) -> str:
    return f"#{rank} {quantity} x {name}" + ("" if tier else " (tier deleted)")


@dataclass(frozen=True, slots=True)
class _BoardPlan:
    board: BoardRef
    rows: list[StandingRow]
    wanted: dict[int, tuple[RewardTier, StandingRow]]  # player -> the tier and row they earn
    standings: list[StandingChange]
    grants: list[GrantChange]


def _standings_plan(season: Season) -> tuple[list[_BoardPlan], StandingsReview]:
    plans = [_board_plan(board) for board in board_list(season_id=season.id)]
    standings = [change for plan in plans for change in plan.standings]
    grants = [change for plan in plans for change in plan.grants]
    digest = hashlib.sha256(repr((standings, grants)).encode()).hexdigest()[:16]
    return plans, StandingsReview(season.id, tuple(standings), tuple(grants), digest)


def _board_plan(board: BoardRef) -> _BoardPlan:
    rows = board_standings_compute(board=board, limit=settings.FINAL_STANDINGS_SIZE)
    old = {s.player_id: s for s in FinalStanding.objects.filter(board_id=board.id)}
    new = {r.player_id: r for r in rows}
    standing_changes = []
    for player in sorted(set(old) | set(new)):
        o, n = old.get(player), new.get(player)
        if (
            o
            and n
            and (o.rank, o.points, o.reached_at, o.metadata, o.tiebreakers, o.attempts)
            == (n.rank, n.points, n.reached_at, n.stored_metadata, n.tiebreakers, n.attempts)
        ):
            continue
        standing_changes.append(
            StandingChange(
                board.slug,
                player,
                o.rank if o else None,
                n.rank if n else None,
                o.points if o else None,
                n.points if n else None,
            )
        )
    standing_changes.sort(key=lambda c: (c.new_rank or 10**12, c.old_rank or 10**12))
    if board.tiers:
        # A league board's grants, like its movements, are final at the close-out: the next
        # season's cohorts were formed from those movements (docs/leagues.md).
        return _BoardPlan(board, rows, {}, standing_changes, [])
    wanted: dict[int, tuple[RewardTier, StandingRow]] = {}
    for tier in RewardTier.objects.filter(board_id=board.id, league_tier="").order_by("rank_from"):
        for row in rows[tier.rank_from - 1 : tier.rank_to]:
            wanted[row.player_id] = (tier, row)
    grants = {g.player_id: g for g in RewardGrant.objects.filter(board_id=board.id)}
    grant_changes = []
    for player in sorted(set(wanted) | set(grants)):
        g = grants.get(player)
        w = wanted.get(player)
        old_label = (
            _grant_label(rank=g.rank, tier=g.tier, name=g.reward_name, quantity=g.quantity)
            + f" ({g.status})"
            if g
            else ""
        )
        if w is None:
            if g and g.status != GrantStatus.REVOKED:
                grant_changes.append(GrantChange(board.slug, player, "revoke", old_label, ""))
            continue
        tier, row = w
        new_label = _grant_label(
            rank=row.rank, tier=tier, name=tier.reward_name, quantity=tier.quantity
        )
        if g is None:
            grant_changes.append(GrantChange(board.slug, player, "grant", "", new_label))
        elif g.status == GrantStatus.REVOKED:
            grant_changes.append(GrantChange(board.slug, player, "reinstate", old_label, new_label))
        elif (g.rank, g.tier_id) != (row.rank, tier.id):
            grant_changes.append(GrantChange(board.slug, player, "change", old_label, new_label))
    return _BoardPlan(board, rows, wanted, standing_changes, grant_changes)


def season_standings_review(*, season_id: int) -> StandingsReview:
    """What a closed season's final standings and grants become after voids and bans."""
    season = Season.objects.get(pk=season_id)
    if season.status != SeasonStatus.CLOSED:
        raise ValidationError(f"season {season_id} is {season.status}, not closed")
    season_results_retained_require(season=season)
    return _standings_plan(season)[1]


@transaction.atomic
def season_standings_correct(*, season_id: int, fingerprint: str) -> StandingsReview:
    """Apply the reviewed changes; refuses if they are no longer what staff reviewed."""
    season = Season.objects.select_for_update(no_key=True).get(pk=season_id)
    if season.status != SeasonStatus.CLOSED:
        raise ValidationError(f"season {season_id} is {season.status}, not closed")
    season_results_retained_require(season=season)
    plans, review = _standings_plan(season)
    if review.fingerprint != fingerprint:
        raise ValidationError("the corrections changed since the review: review them again")
    for plan in plans:
        _board_plan_apply(plan)
    # Every player's history of the season was ranked from the results before the correction,
    # below the final standings' top too.
    season_history_forget(season_id=season_id)
    return review


def _board_plan_apply(plan: _BoardPlan) -> None:
    board = plan.board
    final_standings_replace(board=board, rows=plan.rows)
    grants = {g.player_id: g for g in RewardGrant.objects.filter(board_id=board.id)}
    for change in plan.grants:
        g = grants.get(change.player_id)
        if change.action == "revoke" and g is not None:
            g.status = GrantStatus.REVOKED
            g.save(update_fields=["status", "updated_at"])
            continue
        tier, row = plan.wanted[change.player_id]
        if g is None:
            g = RewardGrant(
                season_id=board.season_id, board_id=board.id, player_id=change.player_id
            )
        if change.action == "reinstate":
            g.status = GrantStatus.PENDING
        g.tier, g.rank = tier, row.rank
        g.reward_name, g.quantity = tier.reward_name, tier.quantity
        g.save()
