"""What create_season (its main board) and create_board share: the board's spec options."""

from __future__ import annotations

from argparse import ArgumentParser, ArgumentTypeError
from typing import Any

from leaderboard.codec import MAX_TIEBREAK_COLUMNS, TIEBREAK_VALUE_MAX, ScoreCodec
from leaderboard.management.arguments import int_between
from leaderboard.models import (
    COHORT_SIZE_MAX,
    COHORT_SIZE_MIN,
    EVENT_TOP_N_DEFAULT,
    EVENT_TOP_N_MAX,
    MAX_ATTEMPTS_MAX,
    MAX_SIZE_MAX,
    BoardOrder,
    ScoringRule,
    TiebreakColumn,
    TiebreakSpecError,
    tiebreak_spec_parse,
)


def _tiebreak(spec: str) -> TiebreakColumn:
    try:
        return tiebreak_spec_parse(spec)
    except TiebreakSpecError as exc:
        raise ArgumentTypeError(str(exc)) from exc


def board_spec_arguments(parser: ArgumentParser) -> None:
    """--order, --rule, --time-resolution (dest ``time_resolution_seconds``), --metadata
    (dest ``keeps_metadata``), --tiebreak (repeated; dest ``tiebreaks``), --cohort-size,
    --event-top-n, --no-events (dest ``rank_events``), and the tournament options
    --join-required, --max-size and --max-attempts."""
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
    parser.add_argument(
        "--tiebreak",
        action="append",
        type=_tiebreak,
        default=[],
        dest="tiebreaks",
        metavar="NAME:ORDER",
        help=f"rank by this column after points, asc or desc (repeat, up to "
        f"{MAX_TIEBREAK_COLUMNS}); results then carry tiebreakers with every column, and "
        f"points and each column go up to {TIEBREAK_VALUE_MAX}",
    )
    parser.add_argument(
        "--cohort-size",
        type=int,
        default=None,
        dest="cohort_size",
        metavar="N",
        help=f"group players into cohorts of N ({COHORT_SIZE_MIN} to {COHORT_SIZE_MAX}), each "
        "ranked on its own (GET .../players/{p}/cohort, .../cohorts/{n}/top)",
    )
    parser.add_argument(
        "--event-top-n",
        type=int,
        default=EVENT_TOP_N_DEFAULT,
        dest="event_top_n",
        metavar="N",
        help=f"the top N that the entered_top and left_top rank events are about (default "
        f"{EVENT_TOP_N_DEFAULT}, up to {EVENT_TOP_N_MAX})",
    )
    parser.add_argument(
        "--no-events",
        action="store_false",
        dest="rank_events",
        help="emit no rank events for this board (docs/events.md)",
    )
    parser.add_argument(
        "--join-required",
        action="store_true",
        dest="join_required",
        help="a tournament: only the results of players who joined (POST "
        ".../players/{p}/join) count; the others are dead letters not_joined",
    )
    parser.add_argument(
        "--max-size",
        type=int_between(1, MAX_SIZE_MAX),
        default=None,
        dest="max_size",
        metavar="N",
        help=f"at most N players may join (1 to {MAX_SIZE_MAX}; needs --join-required)",
    )
    parser.add_argument(
        "--max-attempts",
        type=int_between(1, MAX_ATTEMPTS_MAX),
        default=None,
        dest="max_attempts",
        metavar="N",
        help=f"count at most N distinct matches per player (1 to {MAX_ATTEMPTS_MAX}); later "
        "ones are dead letters attempts_exhausted",
    )


def board_spec_values(options: dict[str, Any]) -> dict[str, Any]:
    return {
        key: options[key]
        for key in (
            "order",
            "rule",
            "time_resolution_seconds",
            "keeps_metadata",
            "tiebreaks",
            "cohort_size",
            "rank_events",
            "event_top_n",
            "join_required",
            "max_size",
            "max_attempts",
        )
    }


def tournament_description(
    *, join_required: bool, max_size: int | None, max_attempts: int | None
) -> str:
    """The tournament options as create_board and create_season report them ("" for none)."""
    parts = []
    if join_required:
        parts.append(
            "join required" + (f", at most {max_size} players" if max_size is not None else "")
        )
    if max_attempts is not None:
        parts.append(f"at most {max_attempts} attempts per player")
    return "; tournament: " + ", ".join(parts) if parts else ""


def codec_description(codec: ScoreCodec, tiebreaks: tuple[TiebreakColumn, ...] = ()) -> str:
    if tiebreaks:
        return (
            f"ranked by points, then {', '.join(map(str, tiebreaks))}, then the earliest time "
            f"(wide keys: points and columns up to {TIEBREAK_VALUE_MAX}, {codec.time_bits} time "
            f"bits at {codec.resolution_seconds}s)"
        )
    return (
        f"score codec {codec.points_bits} points bits (max {codec.max_points}) + "
        f"{codec.time_bits} time bits at {codec.resolution_seconds}s"
    )
