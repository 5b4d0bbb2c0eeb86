"""Writes of ingestion, one module per concept: ``batch`` (the Kafka consumer's batch handler),
``profiles`` (the player-profiles topic's batch handler), ``door`` (the HTTP door),
``tokens`` (game-server tokens), ``checks`` (the season and board checks both entrances share).
Callers import from here.
"""

from __future__ import annotations

from .batch import DecodedBatch, match_results_decode, match_results_ingest
from .checks import latest_achieved_at, messages_check_boards
from .door import (
    HTTP_MAX_RESULTS_PER_REQUEST,
    MatchResultsRejected,
    MatchResultsUnpublished,
    RejectedItem,
    match_results_submit,
)
from .profiles import player_profiles_ingest
from .tokens import (
    GAME_SERVER_TOKEN_MARKER,
    GAME_SERVER_TOKEN_TOUCH_SECONDS,
    game_server_token_create,
    game_server_token_touch,
    game_server_tokens_deactivate,
)

__all__ = [
    "GAME_SERVER_TOKEN_MARKER",
    "GAME_SERVER_TOKEN_TOUCH_SECONDS",
    "HTTP_MAX_RESULTS_PER_REQUEST",
    "DecodedBatch",
    "MatchResultsRejected",
    "MatchResultsUnpublished",
    "RejectedItem",
    "game_server_token_create",
    "game_server_token_touch",
    "game_server_tokens_deactivate",
    "latest_achieved_at",
    "match_results_decode",
    "match_results_ingest",
    "match_results_submit",
    "messages_check_boards",
    "player_profiles_ingest",
]
