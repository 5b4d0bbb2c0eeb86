"""Small helpers shared by tests."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime, timedelta
from typing import Any

from leaderboard.models import MAIN_BOARD, Board, ScoringRule
from leaderboard.redis import BoardRedis
from leaderboard.selectors.boards import BoardRef
from seasons.models import Season
from seasons.selectors import SeasonRef


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


def _exact_score(raw: bytes) -> int:
    # Exact: every board score is an integer below 2**53.
    return int(float(raw))


def board_read(client: BoardRedis, key: str) -> dict[int, int]:
    """The sorted set at ``key`` (a season-long, daily or weekly board) as player -> score;
    empty for a key that does not exist."""
    pairs: list[Any] = client.zrange(key, 0, -1, withscores=True, score_cast_func=_exact_score)
    return {int(member): int(score) for member, score in pairs}


def main_board(season: Season | int) -> BoardRef:
    """The season's main board (a season or its id)."""
    season_id = season if isinstance(season, int) else season.id
    return BoardRef.from_model(
        Board.objects.select_related("season").get(season_id=season_id, slug=MAIN_BOARD)
    )


def main_board_id(season: Season | int) -> int:
    return main_board(season).id


def as_board(board: Season | SeasonRef | Board | BoardRef) -> BoardRef:
    """A board as the services take it; a season (model or ref) stands for its main board."""
    if isinstance(board, BoardRef):
        return board
    if isinstance(board, Board):
        return BoardRef.from_model(board)
    return main_board(board.id)


def _on_board(ref: BoardRef, result: object) -> bool:
    """Whether a stored result (board_id) or a test's Result (season_id, board slug) is on it."""
    board_id = getattr(result, "board_id", None)
    if board_id is not None:
        return bool(board_id == ref.id)
    slug = getattr(result, "board", MAIN_BOARD)
    return bool(getattr(result, "season_id", None) == ref.season_id and slug == ref.slug)


def expected_board(
    board: Season | Board | BoardRef,
    results: Iterable[Any],
    *,
    day: date | None = None,
    banned: Iterable[int] = (),
) -> dict[int, int]:
    """The board the score semantics define, computed in Python from known results (a season
    stands for its main board; results of other boards are left out).

    An independent statement of the rules (not the SQL under test): best = the best points for
    the order at the earliest ticks; latest = the latest result by achieved_at, then the greater
    match id; cumulative = sum of points at the latest ticks.
    """
    ref = as_board(board)
    codec = ref.codec
    starts_at = ref.season.starts_at
    excluded = set(banned)
    per_player: dict[int, tuple[int, int]] = {}
    latest_key: dict[int, tuple[datetime, object]] = {}
    for r in results:
        if not _on_board(ref, r):
            continue
        if r.voided_at is not None or r.player_id in excluded:
            continue
        if day is not None and r.achieved_at.astimezone(UTC).date() != day:
            continue
        ticks = codec.ticks(r.achieved_at - starts_at)
        old = per_player.get(r.player_id)
        if ref.rule == ScoringRule.LATEST:
            key = (r.achieved_at, r.match_id)
            if old is None or key > latest_key[r.player_id]:
                per_player[r.player_id] = (r.points, ticks)
                latest_key[r.player_id] = key
        elif old is None:
            per_player[r.player_id] = (r.points, ticks)
        elif ref.rule == ScoringRule.BEST:
            better = r.points < old[0] if ref.ascending else r.points > old[0]
            if better or (r.points == old[0] and ticks < old[1]):
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


def make_live_season(*, days: int = 30, **kwargs):
    """An active season around now (``days`` before and after): its boards are live and open,
    so the recovery and the reconcile look after them."""
    from django.utils import timezone

    from seasons.models import SeasonStatus

    now = timezone.now()
    return make_season(
        status=SeasonStatus.ACTIVE,
        starts_at=now - timedelta(days=days),
        ends_at=now + timedelta(days=days),
        **kwargs,
    )


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


def redis_url(*, db: int) -> str:
    """The configured Redis (REDIS_URL: whatever host and port the suite runs on) with database
    ``db``: for a test that needs a database of its own on the same server."""
    from urllib.parse import urlsplit, urlunsplit

    from django.conf import settings

    parts = urlsplit(settings.REDIS_URL)
    return urlunsplit(parts._replace(path=f"/{db}"))


def mark_intact(season: Season | int, *, topic: str | None = None) -> None:
    """Mark every board of the season intact, as the recovery does once Redis holds what
    PostgreSQL has (its intact key, and its watermark hash of ``topic``, default the configured
    one): for tests that write or ingest boards without a recovery running."""
    from django.conf import settings

    from leaderboard import keys
    from leaderboard.redis import get_board_redis
    from leaderboard.services import board_mark_intact

    season_id = season if isinstance(season, int) else season.id
    client = get_board_redis()
    for board_id in Board.objects.filter(season_id=season_id).values_list("id", flat=True):
        board_mark_intact(board_id=board_id)
        watermark = keys.ingest_applied_offsets(
            board_id=board_id, topic=topic or settings.KAFKA_MATCH_RESULTS_TOPIC
        )
        client.hset(watermark, "recovered", "1")
