"""The rank events a sequence of results must yield, computed in Python from whole-board ranks.

Independent of the apply scripts' method (they look at the player's neighbours only): here every
player's rank is computed before and after each result, and the events are read off the
differences, as the contract words them (docs/events.md):

- personal_best: the player's value improved (best), changed (latest), or any counted result
  (cumulative);
- rank_changed: the player's own rank moved (previousRank null on a first entry);
- overtaken: of the players who were at or above the player and are now below them, the one
  ranked highest now (directly passed), with otherPlayerId = the player; a first entry passes
  nobody;
- entered_top / left_top: players whose rank crossed the top N; a player who improved pushes
  out, each pushed-out player's otherPlayerId is them; a player whose value got worse (latest,
  cumulative's later tick) leaves on their own, and whoever came up into the top enters it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from leaderboard.models import ScoringRule
from leaderboard.rank_events import match_result_cause, rank_event_id

Value = tuple[tuple[int, ...], int]  # (points and tie-break values, ticks)


@dataclass(frozen=True)
class RefResult:
    partition: int
    offset: int
    player: int
    values: tuple[int, ...]  # points, then the tie-break columns' values
    ticks: int
    match_id: str
    at: int  # unix seconds


class EventsReference:
    """A board (its rule, the ascending flag of each value) and every player's value on it."""

    def __init__(
        self,
        *,
        rule: str,
        ascending: Sequence[bool],
        top_n: int,
        topic: str,
        board_id: int,
        season_id: int,
        slug: str,
    ) -> None:
        self.rule = rule
        self.ascending = tuple(ascending)
        self.top_n = top_n
        self.topic = topic
        self.board_id = board_id
        self.season_id = season_id
        self.slug = slug
        self.held: dict[int, Value] = {}

    def sort_key(self, value: Value) -> tuple[int, ...]:
        """Smaller is better: each value in its order, then the earlier tick."""
        values, ticks = value
        return (*(v if a else -v for v, a in zip(values, self.ascending, strict=True)), ticks)

    def ranks(self) -> dict[int, int]:
        keys = {player: self.sort_key(value) for player, value in self.held.items()}
        return {p: 1 + sum(1 for other in keys.values() if other < k) for p, k in keys.items()}

    def merged(self, old: Value | None, r: RefResult) -> Value | None:
        """The player's value after ``r``; None: nothing counted (an overflow is not tested
        here)."""
        new = (r.values, r.ticks)
        if old is None or self.rule == ScoringRule.LATEST:
            return new
        if self.rule == ScoringRule.BEST:
            return new if self.sort_key(new) < self.sort_key(old) else old
        sums = tuple(a + b for a, b in zip(old[0], r.values, strict=True))
        return (sums, max(old[1], r.ticks))

    def apply(self, r: RefResult) -> list[dict[str, Any]]:
        """The events of one result, in no particular order."""
        old = self.held.get(r.player)
        new = self.merged(old, r)
        assert new is not None
        if self.rule != ScoringRule.CUMULATIVE and new == old:
            return []
        before = self.ranks()
        self.held[r.player] = new
        after = self.ranks()
        events: list[dict[str, Any]] = []
        cause = match_result_cause(
            topic=self.topic, board_id=self.board_id, partition=r.partition, offset=r.offset
        )

        def event(kind: str, player: int, other: int | None = None) -> None:
            value = self.held[player]
            previous = old if player == r.player else value
            events.append(
                {
                    "eventId": rank_event_id(cause, kind, player),
                    "type": kind,
                    "seasonId": self.season_id,
                    "board": self.slug,
                    "playerId": player,
                    "rank": after[player],
                    "previousRank": before.get(player),
                    "points": value[0][0],
                    "previousPoints": None if previous is None else previous[0][0],
                    "matchId": r.match_id,
                    "otherPlayerId": other,
                    "at": datetime.fromtimestamp(r.at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                }
            )

        event("personal_best", r.player)
        if before.get(r.player) != after[r.player]:
            event("rank_changed", r.player)
        improved = old is None or self.sort_key(new) < self.sort_key(old)
        others = [p for p in self.held if p != r.player]
        if improved and old is not None:  # a first entry passes nobody
            was_at_or_above = self._at_or_above(old)
            passed = [
                p for p in others if p in before and was_at_or_above(p) and self._below(p, r.player)
            ]
            if passed:
                event("overtaken", min(passed, key=after.__getitem__), other=r.player)
        n = self.top_n
        in_top_before = before.get(r.player, n + 1) <= n
        if improved and after[r.player] <= n and not in_top_before:
            event("entered_top", r.player)
            for p in others:
                if p in before and before[p] <= n < after[p]:
                    event("left_top", p, other=r.player)
        if not improved and in_top_before and after[r.player] > n:
            event("left_top", r.player)
            for p in others:
                if before[p] > n >= after[p]:
                    event("entered_top", p)
        return events

    def _at_or_above(self, old: Value) -> Callable[[int], bool]:
        """Was player p at or above the mover's old value?"""
        bound = self.sort_key(old)
        return lambda p: self._was_key(p) <= bound

    def _was_key(self, player: int) -> tuple[int, ...]:
        # Only the mover's value changed: every other player holds what they held before.
        return self.sort_key(self.held[player])

    def _below(self, p: int, mover: int) -> bool:
        return self.sort_key(self.held[p]) > self.sort_key(self.held[mover])
