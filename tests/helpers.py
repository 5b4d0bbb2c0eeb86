"""Small helpers shared by tests."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime

from leaderboard.models import MatchResult
from seasons.models import ScoringRule, Season


def wait_until(
    condition: Callable[[], bool],
    *,
    timeout: float = 10.0,
    every: float = 0.01,
    context: Callable[[], str] | None = None,
) -> None:
    """Poll ``condition`` until it holds; fail the test if it doesn't within ``timeout``.

    ``context`` is called on failure and its text added to the error (a subprocess's log, say),
    so that a failure in CI can be read without rerunning it.
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            detail = f"\n{context()}" if context is not None else ""
            raise AssertionError(f"condition not met within {timeout}s{detail}")
        time.sleep(every)


def expected_board(
    season: Season,
    results: Iterable[MatchResult],
    *,
    day: date | None = None,
    banned: Iterable[int] = (),
) -> dict[int, int]:
    """The board the score semantics define, computed in Python from known results.

    An independent statement of the rules (not the SQL under test): best = max points at the
    earliest ticks; cumulative = sum of points at the latest ticks.
    """
    codec = season.codec
    excluded = set(banned)
    per_player: dict[int, tuple[int, int]] = {}
    for r in results:
        if r.voided_at is not None or r.player_id in excluded:
            continue
        if day is not None and r.achieved_at.astimezone(UTC).date() != day:
            continue
        ticks = codec.ticks(r.achieved_at - season.starts_at)
        old = per_player.get(r.player_id)
        if old is None:
            per_player[r.player_id] = (r.points, ticks)
        elif season.rule == ScoringRule.BEST:
            if r.points > old[0] or (r.points == old[0] and ticks < old[1]):
                per_player[r.player_id] = (r.points, ticks)
        else:
            per_player[r.player_id] = (old[0] + r.points, max(old[1], ticks))
    return {
        player: codec.encode(points=points, elapsed_ticks=ticks)
        for player, (points, ticks) in per_player.items()
    }


def make_season(**kwargs):
    """A Season through the factory (typed loosely: factory-boy's classes confuse mypy)."""
    from tests.factories import SeasonFactory

    return SeasonFactory(**kwargs)


def make_result(**kwargs):
    from tests.factories import MatchResultFactory

    return MatchResultFactory(**kwargs)


def day_of(moment: datetime) -> date:
    return moment.astimezone(UTC).date()


def subprocess_database_url() -> str:
    """The test database's URL, for a child process that must see the test's committed rows."""
    from django.db import connection

    db = connection.settings_dict
    return (
        f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST'] or '127.0.0.1'}:"
        f"{db['PORT'] or 5432}/{db['NAME']}"
    )
