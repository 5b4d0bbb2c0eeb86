"""Writes of the close-out, one module per concept: ``close_out`` (drain, final standings,
grants, dropping the keys), ``rewards`` (tiers, grant status), ``standings`` (a closed season's
corrections, reviewed before they apply), ``schedules`` (the seasons of recurring
competitions, created ahead of each occurrence), ``history`` (every player's final entries,
archived after the close-out), ``final_events`` (the season_final rank events), ``leagues`` (a
league board's movements and its grants by rank within each cohort), ``retention`` (closed
seasons' match results deleted past their retention). Callers import from here.
"""

from __future__ import annotations

from .close_out import (
    CloseOutcome,
    CloseWaitingFor,
    SeasonCloseProgress,
    SeasonCloseResult,
    SeasonCloseWait,
    final_standings_replace,
    season_close,
    season_close_wait,
)
from .final_events import (
    board_final_events,
    season_final_events_publish,
    seasons_final_events_due,
)
from .history import (
    HistoryArchived,
    board_history_archive,
    history_prune,
    season_history_archive,
    seasons_history_due,
)
from .leagues import board_movements_decide, league_grants_create
from .retention import (
    ResultsPruned,
    season_results_prune,
    season_results_prune_check,
    season_results_retained_require,
    seasons_results_prune_due,
)
from .rewards import reward_grant_status_set, reward_tier_create
from .schedules import (
    ScheduleAdvanced,
    SchedulesAdvanced,
    schedule_advance,
    schedule_create,
    schedule_league_check,
    schedule_league_set,
    schedule_set_active,
    schedules_advance,
)
from .standings import (
    GrantChange,
    StandingChange,
    StandingsReview,
    season_standings_correct,
    season_standings_review,
)

__all__ = [
    "CloseOutcome",
    "CloseWaitingFor",
    "GrantChange",
    "HistoryArchived",
    "ResultsPruned",
    "ScheduleAdvanced",
    "SchedulesAdvanced",
    "SeasonCloseProgress",
    "SeasonCloseResult",
    "SeasonCloseWait",
    "StandingChange",
    "StandingsReview",
    "board_final_events",
    "board_history_archive",
    "board_movements_decide",
    "final_standings_replace",
    "history_prune",
    "league_grants_create",
    "reward_grant_status_set",
    "reward_tier_create",
    "schedule_advance",
    "schedule_create",
    "schedule_league_check",
    "schedule_league_set",
    "schedule_set_active",
    "schedules_advance",
    "season_close",
    "season_close_wait",
    "season_final_events_publish",
    "season_history_archive",
    "season_results_prune",
    "season_results_prune_check",
    "season_results_retained_require",
    "season_standings_correct",
    "season_standings_review",
    "seasons_final_events_due",
    "seasons_history_due",
    "seasons_results_prune_due",
]
