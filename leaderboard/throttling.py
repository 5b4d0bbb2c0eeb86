"""Throttling of anonymous API clients: a fixed-window counter per client in Redis.

DRF's ``AnonRateThrottle`` keeps each client's request history as a pickled list in the cache
and rewrites it on every request: at thousands of requests a minute that list is the cost.
Here each window is one Redis counter, and each process batches its increments: it syncs
(INCRBY + EXPIRE, one round trip) every ``limit // 100`` requests of a client, every
``SYNC_SECONDS``, and whenever its estimate reaches the limit, so a refusal is always decided
by the global count. A process may over-admit by at most one batch per sync; with a rate
below 100 per window every request syncs and the count is exact.

The rate is read from settings per request (``API_ANON_THROTTLE_RATE``, e.g. ``6000/min``;
empty or ``off`` disables it).
"""

from __future__ import annotations

import logging
import time
from functools import cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django_redis import get_redis_connection
from redis.exceptions import RedisError
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from . import keys

logger = logging.getLogger(__name__)

_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
SYNC_SECONDS = 0.25
_MAX_TRACKED = 10_000


class _Window:
    __slots__ = ("pending", "synced_at", "synced_count")

    def __init__(self) -> None:
        self.synced_count = 0
        self.pending = 0
        self.synced_at = 0.0


# Per process: the window of each client key this process has seen.
_windows: dict[str, _Window] = {}


@cache
def parse_rate(rate: str) -> tuple[int, int] | None:
    """``"6000/min"`` -> (6000, 60); None when throttling is off."""
    rate = rate.strip().lower()
    if rate in {"", "off", "none"}:
        return None
    try:
        count, period = rate.split("/")
        return int(count), _PERIODS[period[0]]
    except (ValueError, KeyError, IndexError):
        raise ImproperlyConfigured(
            f"throttle rate {rate!r} must look like 6000/min (periods: s, min, h, day)"
        ) from None


class AnonFixedWindowThrottle(BaseThrottle):
    scope = "anon"

    def __init__(self) -> None:
        self._wait: float | None = None

    def allow_request(self, request: Request, view: APIView) -> bool:
        parsed = parse_rate(settings.API_ANON_THROTTLE_RATE)
        if parsed is None:
            return True
        limit, period = parsed
        now = time.time()
        window = int(now // period)
        key = keys.throttle_window(scope=self.scope, ident=self.get_ident(request), window=window)
        state = _windows.get(key)
        if state is None:
            if len(_windows) >= _MAX_TRACKED:
                _windows.clear()
            state = _windows[key] = _Window()
        state.pending += 1
        estimate = state.synced_count + state.pending
        if (
            state.pending >= max(1, limit // 100)
            or now - state.synced_at >= SYNC_SECONDS
            or estimate > limit
        ):
            try:
                pipe = get_redis_connection("default").pipeline(transaction=False)
                pipe.incrby(key, state.pending)
                pipe.expire(key, period + 1)
                count, _ = pipe.execute()
            except RedisError:
                # Losing the throttle must not take the read API down with it.
                logger.warning("throttle counter unavailable; letting the request through")
                return True
            state.synced_count, state.pending, state.synced_at = int(count), 0, now
            estimate = state.synced_count
        if estimate <= limit:
            return True
        self._wait = (window + 1) * period - now
        return False

    def wait(self) -> float | None:
        return self._wait
