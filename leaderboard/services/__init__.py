"""Writes to the boards, one module per concept: ``apply`` (ingestion), ``rebuild``,
``reconcile``, ``corrections`` (voids, bans), ``derived`` (top-list snapshots, weekly boards),
``unlink`` (dropping a closed season's keys), ``boards`` (creating boards and seasons with
their main board). Callers import from here.
"""

from __future__ import annotations

from .apply import (
    BoardsApplied,
    CountedResult,
    applied_offsets_get,
    board_results_apply,
    daily_board_expire_at,
)
from .boards import SCORE_FIELDS, board_create, board_update, season_setup
from .corrections import (
    BoardRebuilt,
    BoardsCorrected,
    Correction,
    board_all_rebuild,
    boards_correct,
    daily_boards_existing,
    match_result_void,
    player_ban,
    player_unban,
)
from .derived import (
    WEEKLY_MERGE_CHUNK,
    WeeklyBuildError,
    top_snapshot_refresh,
    top_snapshots_refresh,
    weekly_board_build,
    weekly_board_ensure,
    weekly_boards_build,
)
from .rebuild import (
    DEFAULT_ZADD_BATCH,
    DELTA_MERGE_BATCH,
    MARKER_TTL_SECONDS,
    MAX_OVERFLOWED_RECORDED,
    PHASE_ACTIVATED,
    PHASE_LOADED,
    PHASE_MERGED,
    PHASE_PENDING,
    PREFETCH_CHUNKS,
    REBUILD_SORTED_RUNS,
    RebuildInProgressError,
    RebuildResult,
    board_rebuild,
    spec_args,
)
from .reconcile import (
    DEFAULT_RECONCILE_SAMPLE,
    MISMATCH_EXAMPLES,
    ReconcileResult,
    board_reconcile,
    boards_reconcile_live_seasons,
    reconcile_days,
)
from .repair import BoardRepaired, boards_lost_writes_repair
from .unlink import season_keys_unlink

__all__ = [
    "DEFAULT_RECONCILE_SAMPLE",
    "DEFAULT_ZADD_BATCH",
    "DELTA_MERGE_BATCH",
    "MARKER_TTL_SECONDS",
    "MAX_OVERFLOWED_RECORDED",
    "MISMATCH_EXAMPLES",
    "PHASE_ACTIVATED",
    "PHASE_LOADED",
    "PHASE_MERGED",
    "PHASE_PENDING",
    "PREFETCH_CHUNKS",
    "REBUILD_SORTED_RUNS",
    "SCORE_FIELDS",
    "WEEKLY_MERGE_CHUNK",
    "BoardRebuilt",
    "BoardRepaired",
    "BoardsApplied",
    "BoardsCorrected",
    "Correction",
    "CountedResult",
    "RebuildInProgressError",
    "RebuildResult",
    "ReconcileResult",
    "WeeklyBuildError",
    "applied_offsets_get",
    "board_all_rebuild",
    "board_create",
    "board_rebuild",
    "board_reconcile",
    "board_results_apply",
    "board_update",
    "boards_correct",
    "boards_lost_writes_repair",
    "boards_reconcile_live_seasons",
    "daily_board_expire_at",
    "daily_boards_existing",
    "match_result_void",
    "player_ban",
    "player_unban",
    "reconcile_days",
    "season_keys_unlink",
    "season_setup",
    "spec_args",
    "top_snapshot_refresh",
    "top_snapshots_refresh",
    "weekly_board_build",
    "weekly_board_ensure",
    "weekly_boards_build",
]
