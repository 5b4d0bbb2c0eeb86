"""Every Lua script of the product, loaded once per process and called by SHA.

Scripts live in ``leaderboard/lua/*.lua``; ``common.lua`` (shared helpers: exact score
formatting, the per-rule merge, snapshot visibility) is prepended to each. redis-py's
``Script`` objects call EVALSHA and reload transparently on NOSCRIPT (a restarted or flushed
Redis), so callers never see a missing script.
"""

from __future__ import annotations

from pathlib import Path

import redis
from redis.commands.core import Script

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


def get_script(client: redis.Redis, name: str) -> Script:
    """The registered script ``lua/<name>.lua`` bound to ``client``.

    Registration only hashes the source; the first call loads it into Redis.
    """
    key = (id(client), name)
    script = _registered.get(key)
    if script is None or script.registered_client is not client:
        script = _registered[key] = client.register_script(_source(name))
    return script
