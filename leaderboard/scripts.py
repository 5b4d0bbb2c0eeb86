"""Every Lua script of the product, loaded once per process and called by SHA.

Scripts live in ``leaderboard/lua/*.lua``; ``common.lua`` (shared helpers: exact score
formatting, the per-rule merge, snapshot visibility) is prepended to each. redis-py's
``Script`` objects call EVALSHA and reload transparently on NOSCRIPT (a restarted or flushed
Redis), so callers never see a missing script.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from redis.cluster import RedisCluster
from redis.commands.core import Script
from redis.exceptions import ConnectionError, NoScriptError, ResponseError, TimeoutError

from leaderboard.redis import BoardRedis

logger = logging.getLogger(__name__)

LUA_DIR = Path(__file__).resolve().parent / "lua"


def _read_sources() -> dict[str, str]:
    common = (LUA_DIR / "common.lua").read_text()
    return {
        path.stem: f"{common}\n-- ---- {path.name} ----\n{path.read_text()}"
        for path in sorted(LUA_DIR.glob("*.lua"))
        if path.stem != "common"
    }


# Read once, when the process imports its Python: a process keeps running the Lua that matches
# its code even if the files change under it (a deploy or a checkout mid-run). Read lazily, a
# long-running process could pair its old Python with a newer script's argument layout; that
# happened in a benchmark run, whose ingestion then silently applied nothing.
_SOURCES = _read_sources()


def _source(name: str) -> str:
    try:
        return _SOURCES[name]
    except KeyError:
        raise ValueError(f"no Lua script {name!r} in {LUA_DIR}") from None


_registered: dict[tuple[int, str], Script] = {}


def get_script(client: BoardRedis, name: str) -> Script:
    """The registered script ``lua/<name>.lua`` bound to ``client``.

    Registration only hashes the source; the first call loads it into Redis.
    """
    key = (id(client), name)
    script = _registered.get(key)
    if script is None or script.registered_client is not client:
        script = _registered[key] = client.register_script(_source(name))
    return script


def read_script_call(
    client: BoardRedis,
    name: str,
    *,
    keys: Sequence[str],
    args: Sequence[str | int],
    master_keys: Sequence[str] = (),
) -> Any:
    """Run the read-only script ``name``; on a cluster client that reads from replicas, on the
    replica of the keys' slot. ``master_keys`` follow ``keys`` whenever the master answers
    (the fallback from a replica included): a guard only the master can vouch for, such as a
    board's checked key, which is never replicated.

    redis-py routes EVALSHA to the master whatever the client's strategy (it cannot know a
    script only reads), and would ask a node for the keys of EVALSHA_RO with COMMAND GETKEYS
    first (a second round trip per read). So the node is picked here, from the client's slot
    map, and EVALSHA_RO (which a READONLY replica accepts) is sent to it. A replica that has not
    cached the script (scripts are not replicated) answers NOSCRIPT: EVAL_RO sends the source,
    which caches it there. A slot without a replica, or a replica that fails to answer, falls
    back to the master through the ordinary script call.
    """
    on_master = [*keys, *master_keys]
    if not (isinstance(client, RedisCluster) and client.load_balancing_strategy is not None):
        return get_script(client, name)(keys=on_master, args=args)
    replica = client.get_node_from_key(keys[0], replica=True)
    if replica is not None:
        script = get_script(client, name)
        try:
            try:
                return client.execute_command(
                    "EVALSHA_RO", script.sha, len(keys), *keys, *args, target_nodes=replica
                )
            except NoScriptError:
                return client.execute_command(
                    "EVAL_RO", script.script, len(keys), *keys, *args, target_nodes=replica
                )
        except (ConnectionError, TimeoutError, ResponseError) as exc:
            # A dead replica, or one that no longer serves the slot (MOVED after a failover):
            # the master answers; the client refreshes its slot map on its own.
            logger.info("read on replica %s failed (%s); reading the master", replica.name, exc)
    return get_script(client, name)(keys=on_master, args=args)


@dataclass(frozen=True, slots=True)
class ScriptCall:
    """One script call to pipeline: every key of ``keys`` in one slot (one board)."""

    script: Script
    keys: Sequence[str]
    args: Sequence[str | int]


@dataclass(frozen=True, slots=True)
class Command:
    """One plain command to pipeline beside script calls (``HMGET key field ...``)."""

    args: tuple[str | int, ...]


def calls_pipelined(client: BoardRedis, calls: Sequence[ScriptCall | Command]) -> list[Any]:
    """The replies of ``calls``, sent in one pipeline (on a cluster: one per node), each reply
    or, in its place, the error its call got: the caller decides which of them fail it (a read
    of a board with its players' names keeps the board's answer when only the names fail).

    EVALSHA goes in as a raw command: redis-py's cluster pipeline refuses ``evalsha`` by name
    (it cannot know a script's keys are in one slot; ours are, by construction), and its
    standalone pipeline's script preloading does not exist there. A node that answers NOSCRIPT
    ran nothing: a restarted node, or a replica just promoted (the script cache is neither
    persisted nor replicated). Those calls are re-sent one by one through the Script object,
    which loads the source (on every master of a cluster) and retries.
    """
    pipe = client.pipeline(transaction=False)
    for call in calls:
        if isinstance(call, Command):
            pipe.execute_command(*call.args)
        else:
            pipe.execute_command("EVALSHA", call.script.sha, len(call.keys), *call.keys, *call.args)
    replies = pipe.execute(raise_on_error=False)
    out: list[Any] = []
    for call, reply in zip(calls, replies, strict=True):
        if isinstance(reply, NoScriptError) and isinstance(call, ScriptCall):
            try:
                reply = call.script(keys=list(call.keys), args=list(call.args))
            except Exception as exc:
                reply = exc
        out.append(reply)
    return out


def scripts_pipelined(client: BoardRedis, calls: Sequence[ScriptCall | Command]) -> list[Any]:
    """The replies of ``calls``, sent in one pipeline (``calls_pipelined``); the first error
    any of them got is raised after the pipeline ran, as ``pipe.execute()`` would."""
    replies = calls_pipelined(client, calls)
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return replies
