"""Throttling of anonymous API clients: a fixed-window counter per client in Redis.

DRF's ``AnonRateThrottle`` keeps each client's request history as a pickled list in the cache
and rewrites it on every request: at thousands of requests a minute that list is the cost.
A fixed window costs one pipelined INCR + EXPIRE. The rate is read from settings per request
(``API_ANON_THROTTLE_RATE``, e.g. ``6000/min``; empty or ``off`` disables it).
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
        try:
            pipe = get_redis_connection("default").pipeline(transaction=False)
            pipe.incr(key)
            pipe.expire(key, period + 1)
            count, _ = pipe.execute()
        except RedisError:
            # Losing the throttle must not take the read API down with it.
            logger.warning("throttle counter unavailable; letting the request through")
            return True
        if int(count) <= limit:
            return True
        self._wait = (window + 1) * period - now
        return False

    def wait(self) -> float | None:
        return self._wait
