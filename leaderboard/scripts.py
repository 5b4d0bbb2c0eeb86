"""Every Lua script of the product, loaded once per process and called by SHA.

Scripts live in ``leaderboard/lua/*.lua``; ``common.lua`` (shared helpers: exact score
formatting, the per-rule merge, snapshot visibility) is prepended to each. redis-py's
``Script`` objects call EVALSHA and reload transparently on NOSCRIPT (a restarted or flushed
Redis), so callers never see a missing script.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import redis
from redis.commands.core import Script

LUA_DIR = Path(__file__).resolve().parent / "lua"


@cache
def _source(name: str) -> str:
    common = (LUA_DIR / "common.lua").read_text()
    body = (LUA_DIR / f"{name}.lua").read_text()
    return f"{common}\n-- ---- {name}.lua ----\n{body}"


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
