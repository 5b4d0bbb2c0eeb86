"""What create_season (its main board) and create_board share: the board's spec options."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from leaderboard.codec import ScoreCodec
from leaderboard.models import BoardOrder, ScoringRule


def board_spec_arguments(parser: ArgumentParser) -> None:
    """--order, --rule, --time-resolution (dest ``time_resolution_seconds``), --metadata
    (dest ``keeps_metadata``)."""
    parser.add_argument(
        "--order",
        choices=BoardOrder.values,
        default=BoardOrder.DESC,
        help="desc: higher wins (default); asc: lower wins (lap times)",
    )
    parser.add_argument("--rule", choices=ScoringRule.values, default=ScoringRule.BEST)
    parser.add_argument(
        "--time-resolution",
        type=int,
        default=1,
        dest="time_resolution_seconds",
        help="tie-break resolution in seconds (default 1)",
    )
    parser.add_argument(
        "--metadata",
        action="store_true",
        dest="keeps_metadata",
        help="keep each result's metadata: entries carry the one that gives the player's value",
    )


def board_spec_values(options: dict[str, Any]) -> dict[str, Any]:
    return {
        key: options[key] for key in ("order", "rule", "time_resolution_seconds", "keeps_metadata")
    }


def codec_description(codec: ScoreCodec) -> str:
    return (
        f"score codec {codec.points_bits} points bits (max {codec.max_points}) + "
        f"{codec.time_bits} time bits at {codec.resolution_seconds}s"
    )
