"""The season_final rank events: each player of a closed board's final standings, with their
rank and reward, on the rank-events topic (docs/events.md).

Published after the close-out's transaction commits, from what it stored (FinalStanding and
RewardGrant), board by board; a board's FinalEventsSent marker is written once Kafka has
acknowledged them. A crash in between publishes the board's events again at the next sweep,
with the same ids ("final:<board id>:season_final:<player id>"): at least once.
"""

from __future__ import annotations

import logging

from django.utils import timezone

from leaderboard.models import Board
from leaderboard.rank_events import (
    RankEvent,
    RankEventSink,
    RankEventType,
    rank_event_id,
    rank_event_sink,
)
from seasons.models import Season, SeasonStatus

from ..models import FinalEventsSent, FinalStanding, RewardGrant

logger = logging.getLogger(__name__)


def board_final_events(*, board: Board, season: Season) -> list[RankEvent]:
    """The board's season_final events, in rank order."""
    rewards = {
        player: {"name": name, "quantity": quantity}
        for player, name, quantity in RewardGrant.objects.filter(board=board).values_list(
            "player_id", "reward_name", "quantity"
        )
    }
    at = season.closed_at or timezone.now()
    return [
        RankEvent(
            event_id=rank_event_id(f"final:{board.id}", RankEventType.SEASON_FINAL, player),
            type=RankEventType.SEASON_FINAL,
            season_id=season.id,
            board=board.slug,
            player_id=player,
            rank=rank,
            previous_rank=None,
            points=points,
            previous_points=None,
            match_id=None,
            other_player_id=None,
            at=at,
            reward=rewards.get(player),
        )
        for rank, player, points in FinalStanding.objects.filter(board=board)
        .order_by("rank")
        .values_list("rank", "player_id", "points")
    ]


def season_final_events_publish(*, season_id: int, sink: RankEventSink | None = None) -> int:
    """Publish the season_final events of each board of the closed season that emits rank
    events and has not sent them yet; the number of events sent."""
    season = Season.objects.get(pk=season_id)
    if season.status != SeasonStatus.CLOSED:
        return 0
    sent = 0
    for board in Board.objects.filter(
        season=season, rank_events=True, final_events__isnull=True
    ).order_by("id"):
        events = board_final_events(board=board, season=season)
        (sink or rank_event_sink()).publish(messages=[(e.key, e.value) for e in events])
        FinalEventsSent.objects.get_or_create(
            board=board, defaults={"season": season, "events": len(events)}
        )
        sent += len(events)
        logger.info(
            "season %s board %s: %d season_final events sent", season.id, board.slug, len(events)
        )
    return sent


def seasons_final_events_due() -> list[int]:
    """Closed seasons with a board that emits rank events and has not sent its season_final
    events (just closed, or a crash before they were sent)."""
    return list(
        Season.objects.filter(
            status=SeasonStatus.CLOSED,
            boards__rank_events=True,
            boards__final_events__isnull=True,
        )
        .distinct()
        .order_by("id")
        .values_list("id", flat=True)
    )
