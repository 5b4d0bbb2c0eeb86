"""Live ingestion as the rebuild protocol sees it: store a result, then apply it to Redis."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import redis
from django.db import connection, transaction

from ingestion.models import MatchResult
from leaderboard import keys
from leaderboard.scripts import LUA_DIR
from seasons.models import Season

_SOURCE = (
    (LUA_DIR / "common.lua").read_text()
    + "\n"
    + (Path(__file__).parent / "lua" / "reference_apply.lua").read_text()
)


def store(season: Season, *, player_id: int, points: int, at: datetime) -> tuple[MatchResult, int]:
    """Insert one result in its own committed transaction; returns it and its xid."""
    with transaction.atomic():
        result = MatchResult.objects.create(
            match_id=uuid.uuid4(),
            season=season,
            player_id=player_id,
            points=points,
            achieved_at=at,
        )
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_current_xact_id()::text::bigint")
            row = cursor.fetchone()
    assert row is not None
    return result, int(row[0])


def apply(client: redis.Redis, season: Season, result: MatchResult, xid: int) -> None:
    """Apply a stored result to its season board and daily board, protocol included."""
    script = client.register_script(_SOURCE)
    codec = season.codec
    ticks = codec.ticks(result.achieved_at - season.starts_at)
    day = result.achieved_at.astimezone(UTC).date()
    for board in (
        keys.season_board(season_id=season.id),
        keys.daily_board(season_id=season.id, day=day),
    ):
        script(
            keys=[
                board,
                keys.rebuild_marker(board_key=board),
                keys.rebuild_pending(board_key=board),
                keys.rebuild_delta(board_key=board),
            ],
            args=[
                str(result.player_id),
                result.points,
                ticks,
                xid,
                str(season.rule),
                codec.time_bits,
                codec.max_points,
            ],
        )


def ingest(
    client: redis.Redis, season: Season, *, player_id: int, points: int, at: datetime
) -> MatchResult:
    result, xid = store(season, player_id=player_id, points=points, at=at)
    apply(client, season, result, xid)
    return result


def board(client: redis.Redis, key: str) -> dict[int, int]:
    pairs: list[tuple[bytes, float]] = client.zrange(key, 0, -1, withscores=True)  # type: ignore[assignment]
    return {int(m): int(s) for m, s in pairs}
