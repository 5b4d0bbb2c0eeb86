"""The history of rebuilds and reconciles (the staff dashboard)."""

from __future__ import annotations

from ..models import RebuildRun, ReconcileRun


def board_runs_latest(
    *, season_id: int, limit: int = 5
) -> tuple[list[RebuildRun], list[ReconcileRun]]:
    """The season's latest rebuild runs and reconcile runs, newest first, with their boards."""
    rebuilds = RebuildRun.objects.select_related("board").filter(season_id=season_id)
    reconciles = ReconcileRun.objects.select_related("board").filter(season_id=season_id)
    return (
        list(rebuilds.order_by("-started_at")[:limit]),
        list(reconciles.order_by("-checked_at")[:limit]),
    )
