"""Score metadata (contract 0.3): each entry's deciding result's metadata, from PostgreSQL.

A board created with ``--metadata`` stores each result's metadata on its row
(``MatchResult.metadata``). Which result decides an entry follows from the entry and the board's
rule, so the metadata is looked up rather than kept a second time in Redis:

- ``best``: the earliest counted result with the entry's points (the board credits a value to
  the first time it was reached);
- ``latest``: the latest counted result with the entry's points (by ``achievedAt``, an exact tie
  to the greater ``matchId``, as the board decides);
- ``cumulative``: the most recent counted result (same order).

Each is a function of the set of counted results, so redelivery, disorder, replays, rebuilds
and recoveries change nothing, and a voided result stops deciding at once. Matching on the
entry's points (best, latest) keeps an entry and its metadata one state of the board while a
stored result is still on its way to Redis. One statement per read, one index probe per entry
(``match_result_board_player_idx``), for the entries this process has not looked up within
LEADERBOARD_METADATA_CACHE_SECONDS: the memo's key is the entry's exact encoded score, so a new
value is always a new lookup, and the snapshot refresh of an unchanged top list makes none. The
memo serves what it holds through a PostgreSQL outage, as the season memo does. docs/read-api.md
has the costs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, TypeVar

import orjson
from django.db import connection

from seasons.memo import ProcessMemo, process_memo

from ..models import MatchResult, ScoringRule
from .boards import BoardRef

_TABLE = MatchResult._meta.db_table

E = TypeVar("E")

# (board id, period start, period end, player id, encoded score) -> the metadata (None: none).
_MetadataKey = tuple[int, datetime | None, datetime | None, int, bytes]
_memo: ProcessMemo[_MetadataKey, Any] = process_memo(
    ttl_setting="LEADERBOARD_METADATA_CACHE_SECONDS",
    fallback_setting="LEADERBOARD_SEASON_FALLBACK_SECONDS",
    maxsize=20_000,
)


def _metadata_sql(*, rule: str, bounded: bool, wide: bool) -> str:
    points = "" if rule == ScoringRule.CUMULATIVE else "AND m.points = q.points"
    if wide and rule != ScoringRule.CUMULATIVE:
        # On a board with tie-break columns the entry's value is the whole key.
        points += " AND m.tiebreakers = q.tiebreakers::int[]"
    window = "AND m.achieved_at >= %s AND m.achieved_at < %s" if bounded else ""
    order = "ASC" if rule == ScoringRule.BEST else "DESC"
    return f"""
        SELECT q.player_id, r.metadata
        FROM unnest(%s::bigint[], %s::bigint[], %s::text[]) AS q(player_id, points, tiebreakers)
        CROSS JOIN LATERAL (
            SELECT m.metadata FROM {_TABLE} m
            WHERE m.board_id = %s AND m.player_id = q.player_id AND m.voided_at IS NULL
                  {points} {window}
            ORDER BY m.achieved_at {order}, m.match_id DESC
            LIMIT 1
        ) r
    """  # noqa: S608 -- the table name comes from the model; every value is a parameter


def board_metadata_get(
    *,
    board: BoardRef,
    entries: Sequence[tuple[int, int, tuple[int, ...] | None]],
    since: datetime | None = None,
    until: datetime | None = None,
) -> dict[int, Any]:
    """The deciding result's metadata of each ``(player_id, points, tiebreakers)`` entry of
    ``board``, by player (a player without a deciding result, or whose result carried none,
    reads None); ``since``/``until`` bound the results to a daily or weekly board's period."""
    if not entries:
        return {}
    bounded = since is not None and until is not None
    params: list[Any] = [
        [e[0] for e in entries],
        [e[1] for e in entries],
        [None if e[2] is None else "{" + ",".join(map(str, e[2])) + "}" for e in entries],
        board.id,
    ]
    if bounded:
        params += [since, until]
    with connection.cursor() as cursor:
        cursor.execute(
            _metadata_sql(rule=board.rule, bounded=bounded, wide=bool(board.tiebreaks)), params
        )
        # Django reads jsonb as text (its JSONField decodes it).
        found = {
            player_id: _metadata_loads(value) if isinstance(value, str | bytes) else value
            for player_id, value in cursor.fetchall()
        }
    return {e[0]: found.get(e[0]) for e in entries}


# Twenty digits or more may be past 64 bits, which orjson reads as a float (metadata keeps
# such integers exact: ingestion/schema.py, metadata_compact).
_LONG_DIGITS = re.compile(r"[0-9]{20}")


def _metadata_loads(value: str | bytes) -> Any:
    text = value.decode() if isinstance(value, bytes) else value
    if _LONG_DIGITS.search(text):
        return json.loads(text)
    return orjson.loads(text)


def _lookup(entry: Any) -> tuple[int, int, tuple[int, ...] | None]:
    tiebreakers = getattr(entry, "tiebreakers", None)
    return (
        entry.player_id,
        entry.points,
        None if tiebreakers is None else tuple(tiebreakers.values()),
    )


def entries_with_metadata(
    *,
    board: BoardRef,
    entries: Sequence[E],
    since: datetime | None = None,
    until: datetime | None = None,
) -> list[E]:
    """``entries`` (RankingEntry, or any frozen dataclass with ``player_id``, ``points`` and
    ``metadata``) with their metadata, where the board keeps metadata; as they are elsewhere."""
    if not board.keeps_metadata or not entries:
        return list(entries)
    # Entries read from Redis carry their exact score and go through the memo; the others (a
    # standing computed from PostgreSQL) are looked up each time.
    keyed = {
        (board.id, since, until, e.player_id, e.score): _lookup(e)  # type: ignore[attr-defined]
        for e in entries
        if getattr(e, "score", None) is not None
    }

    def load(due: list[_MetadataKey]) -> dict[_MetadataKey, Any]:
        found = board_metadata_get(
            board=board, entries=[keyed[key] for key in due], since=since, until=until
        )
        return {key: found[key[3]] for key in due}

    by_player: dict[int, Any] = {}
    if keyed:
        by_player = {key[3]: value for key, value in _memo.get_many(list(keyed), load).items()}
    rest = [e for e in entries if e.player_id not in by_player]  # type: ignore[attr-defined]
    if rest:
        by_player.update(
            board_metadata_get(
                board=board,
                entries=[_lookup(e) for e in rest],
                since=since,
                until=until,
            )
        )
    return [replace(e, metadata=by_player[e.player_id]) for e in entries]  # type: ignore[attr-defined, type-var]
