"""The name cache: each player's visible (displayName, country) in Redis, for the board reads.

PostgreSQL (``players.PlayerProfile``) is the truth; this cache is an index of it that every
read can join in one round trip instead of a query per page. Why it lives here and not in the
players app: every Redis key comes from leaderboard/keys.py and every Lua script from
leaderboard/lua, and the players app sits below the leaderboard app in the layers (it may not
import it). So the players app says what changed (``players.signals.profiles_changed``, sent
once each write commits) and this module, connected to it in ``LeaderboardConfig.ready``, reads
those rows back and writes them here: every writer (the consumer, the PUT, the admin's hide and
unhide, a shell) keeps the cache without knowing of it.

Layout: hashes of 100 players (``keys.player_names``: player id // 100), field = player id,
value = ``<revision>:<CC><name>`` where CC is the ISO country or ``--`` and the name is empty
when there is none to show (hidden). Small hashes stay listpacks, Redis's compact encoding:
about 30 bytes per player with dense ids (docs/read-api.md, "Player names"), against about 90
for a key per player. Every write goes through ``player_names_set.lua``, which keeps a field
only for a higher revision (``PlayerProfile.revision``, raised by every change of the row):
the consumer and a staff hide racing never leave the older state behind.

A hide is written through at once (its commit sends the signal); a Redis that lost the cache
is refilled from PostgreSQL by ``player_names_recover`` (the recovery task, every few seconds).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from redis.cluster import RedisCluster

from players.models import PlayerProfile
from players.selectors import player_profiles_get, player_profiles_iter

from . import keys
from .redis import BoardRedis, get_board_read_redis, get_board_redis
from .scripts import Command, ScriptCall, get_script, read_script_call, scripts_pipelined

logger = logging.getLogger(__name__)

_NO_COUNTRY = "--"
# A rebuild that crashed holds its lock at most this long.
REBUILD_LOCK_SECONDS = 600


@dataclass(frozen=True, slots=True)
class PlayerName:
    """What every entry shows of a player: null when unknown or hidden."""

    display_name: str | None
    country: str | None


UNKNOWN = PlayerName(None, None)


def player_name_encode(*, revision: int, display_name: str | None, country: str | None) -> str:
    return f"{int(revision)}:{country or _NO_COUNTRY}{display_name or ''}"


def player_name_decode(raw: bytes | str | None) -> PlayerName:
    if raw is None:
        return UNKNOWN
    text = raw.decode() if isinstance(raw, bytes) else raw
    _, _, rest = text.partition(":")
    country = rest[:2]
    return PlayerName(rest[2:] or None, None if country == _NO_COUNTRY else country)


def _write(profiles: Iterable[PlayerProfile]) -> int:
    """Each profile's visible fields into its bucket, one script call per bucket, pipelined."""
    buckets: dict[str, list[str]] = {}
    for profile in profiles:
        buckets.setdefault(keys.player_names(player_id=profile.player_id), []).extend(
            (
                str(profile.player_id),
                player_name_encode(
                    revision=profile.revision,
                    display_name=profile.visible_name,
                    country=profile.country,
                ),
            )
        )
    if not buckets:
        return 0
    client = get_board_redis()
    script = get_script(client, "player_names_set")
    replies = scripts_pipelined(
        client, [ScriptCall(script=script, keys=[key], args=args) for key, args in buckets.items()]
    )
    return sum(int(reply) for reply in replies)


def player_names_refresh(*, player_ids: Sequence[int]) -> int:
    """Write the players' current rows into the cache; the number of fields written."""
    return _write(player_profiles_get(player_ids=player_ids).values())


def player_names_on_change(sender: Any, *, player_ids: Sequence[int], **kwargs: Any) -> None:
    """The receiver of ``players.signals.profiles_changed``."""
    player_names_refresh(player_ids=player_ids)


# Up to this many buckets a pipeline of HMGETs is cheaper than the script, which pays its call
# and its common.lua prelude once (a profile put the crossing near four buckets).
_PIPELINED_BUCKETS_MAX = 4


@dataclass(frozen=True, slots=True)
class NamesRead:
    """How to read some players' names: the calls, and the players each call's reply answers,
    in order. Sent on their own (``player_names_get``) or in the pipeline of the board read the
    names adorn, where the players are known before the board answers (a cohort, a friends
    list: selectors/rankings.py), which saves the names their own round trip."""

    calls: tuple[ScriptCall | Command, ...]
    players: tuple[tuple[int, ...], ...]

    def names(self, replies: Sequence[Any]) -> dict[int, PlayerName]:
        """The names from ``replies``, one per call; UNKNOWN for players without one."""
        names: dict[int, PlayerName] = {}
        for ids, values in zip(self.players, replies, strict=True):
            for player_id, raw in zip(ids, values, strict=True):
                names[player_id] = player_name_decode(raw)
        return names


def player_names_read(*, player_ids: Sequence[int], client: BoardRedis) -> NamesRead:
    """The calls reading the cached names of ``player_ids`` from ``client``: one HMGET per
    bucket of 100 players; on a single Redis, past a few buckets, all of them in one script
    call instead (``player_names_get.lua``: a cluster holds each bucket in its own slot). A
    page of dense ids is a bucket or two; a cohort's or a friends list's players are spread
    over up to one bucket each, where redis-py's cost per pipelined command made the names the
    larger part of the read (docs/benchmarks.md, "Cohorts and leagues")."""
    # Grouped by bucket number first: one key built per bucket, not per player.
    buckets: dict[int, list[int]] = {}
    for player_id in dict.fromkeys(player_ids):
        buckets.setdefault(player_id // keys.PLAYER_NAMES_BUCKET_SIZE, []).append(player_id)
    if isinstance(client, RedisCluster) or len(buckets) <= _PIPELINED_BUCKETS_MAX:
        return NamesRead(
            calls=tuple(
                Command(("HMGET", keys.player_names(player_id=ids[0]), *map(str, ids)))
                for ids in buckets.values()
            ),
            players=tuple(tuple(ids) for ids in buckets.values()),
        )
    args: list[str | int] = []
    for ids in buckets.values():
        args.append(len(ids))
        args += [str(player_id) for player_id in ids]
    call = ScriptCall(
        script=get_script(client, "player_names_get"),
        keys=[keys.player_names(player_id=ids[0]) for ids in buckets.values()],
        args=args,
    )
    return NamesRead(calls=(call,), players=(tuple(p for ids in buckets.values() for p in ids),))


def player_names_get(*, player_ids: Sequence[int]) -> dict[int, PlayerName]:
    """The cached names of ``player_ids`` (UNKNOWN for players without one), in one round trip
    (``player_names_read``). Read where the boards are read (a replica with
    ``REDIS_READ_FROM_REPLICAS``): a name may lag its write by the replication delay, far
    inside the contract's 5 seconds for a hide."""
    if not player_ids:
        return {}
    client = get_board_read_redis()
    read = player_names_read(player_ids=player_ids, client=client)
    first = read.calls[0]
    if len(read.calls) == 1 and isinstance(first, Command):
        # One bucket (a player entry, a page of dense ids): a plain HMGET, cheaper than a
        # pipeline.
        return read.names([client.execute_command(*first.args)])
    if len(read.calls) == 1 and isinstance(first, ScriptCall):
        return read.names(
            [read_script_call(client, "player_names_get", keys=first.keys, args=first.args)]
        )
    return read.names(scripts_pipelined(client, read.calls))


def player_names_rebuild(*, chunk_size: int = 10_000) -> int:
    """Write every profile of PostgreSQL into the cache (revision-guarded: safe beside live
    writers); the number of profiles read."""
    total = 0
    for chunk in player_profiles_iter(chunk_size=chunk_size):
        _write(chunk)
        total += len(chunk)
    get_board_redis().set(keys.player_names_intact(), "1")
    return total


def player_names_recover(*, redis_restarted: bool = False) -> int | None:
    """Rebuild the cache when Redis lost it (its intact key is gone) or restarted (it may have
    come back without its last writes); None when nothing was to do or another process is at
    it, else the number of profiles written."""
    client = get_board_redis()
    if not redis_restarted and client.exists(keys.player_names_intact()):
        return None
    if not client.set(keys.player_names_rebuilding(), "1", nx=True, ex=REBUILD_LOCK_SECONDS):
        return None
    try:
        total = player_names_rebuild()
    finally:
        client.delete(keys.player_names_rebuilding())
    logger.info("name cache rebuilt from PostgreSQL: %d profile(s)", total)
    return total
