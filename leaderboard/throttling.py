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

A client is its address as this server can trust it (``client_address``): REMOTE_ADDR, or,
behind ``API_TRUSTED_PROXY_COUNT`` proxies, the X-Forwarded-For entry the outermost trusted
proxy appended. Anything a client can write alone (the rest of the header) is ignored, so a
forged header neither escapes the throttle nor grows the Redis key.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import math
import time
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse
from django_redis import get_redis_connection
from redis.exceptions import RedisError
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from . import keys

logger = logging.getLogger(__name__)

_PERIODS = {
    "s": 1,
    "sec": 1,
    "second": 1,
    "m": 60,
    "min": 60,
    "minute": 60,
    "h": 3600,
    "hour": 3600,
    "d": 86400,
    "day": 86400,
}
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
    """``"6000/min"`` -> (6000, 60); None when throttling is off. Strict, unlike DRF's reading
    of the period's first letter: ``6000/month`` would be 6000 a minute there."""
    rate = rate.strip().lower()
    if rate in {"", "off", "none"}:
        return None
    count, _, period = rate.partition("/")
    if count.isascii() and count.isdigit() and int(count) > 0 and period in _PERIODS:
        return int(count), _PERIODS[period]
    raise ImproperlyConfigured(
        f"API_ANON_THROTTLE_RATE={rate!r} must look like 6000/min: a positive count, then one "
        f"of {', '.join(_PERIODS)} (or off)"
    )


# The longest address worth parsing: a textual IPv6 address with an IPv4 tail is 45
# characters; a scope id (fe80::1%eth0) adds a few.
_MAX_ADDRESS_CHARS = 64


def _ip(text: str) -> str | None:
    """``text`` as a canonical IP address, or None if it is not one."""
    text = text.strip()
    if not text or len(text) > _MAX_ADDRESS_CHARS:
        return None
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None


def client_address(meta: Mapping[str, Any]) -> str:
    """The client's address as far as this server can trust it (the throttle's identity).

    With ``API_TRUSTED_PROXY_COUNT`` = 0, REMOTE_ADDR: X-Forwarded-For is the client's own
    words. With N > 0, the N-th X-Forwarded-For entry from the right: each trusted proxy appends
    the address it saw, so that entry is the one the outermost trusted proxy wrote; whatever
    lies left of it came from the client. A missing, short or non-IP entry falls back to
    REMOTE_ADDR. The result is an IP address when one is known, else REMOTE_ADDR as given
    (``keys.throttle_window`` hashes anything longer than an address).
    """
    remote = str(meta.get("REMOTE_ADDR") or "")
    hops = settings.API_TRUSTED_PROXY_COUNT
    if hops > 0:
        forwarded = str(meta.get("HTTP_X_FORWARDED_FOR") or "")
        # rsplit with a bound: only the trusted tail is split, however long the header.
        entries = forwarded.rsplit(",", hops) if forwarded else []
        if len(entries) >= hops:
            address = _ip(entries[-hops])
            if address is not None:
                return address
    return _ip(remote) or remote


# An ISP hands a subscriber a /64 (or more) of IPv6: one client can use 2^64 addresses, so
# a throttle keyed on the exact address limits nobody.
_IPV6_CLIENT_PREFIX = 64


def throttle_ident(address: str) -> str:
    """Whom the throttle counts: an IPv4 address itself (an IPv4-mapped IPv6 address as that
    IPv4 address), an IPv6 address's /64 network, anything else as given."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        network = ipaddress.IPv6Network((int(ip), _IPV6_CLIENT_PREFIX), strict=False)
        return str(network)
    return address


class AnonFixedWindowThrottle(BaseThrottle):
    scope = "anon"

    def __init__(self) -> None:
        self._wait: float | None = None

    def get_ident(self, request: Request | HttpRequest) -> str:
        return throttle_ident(client_address(request.META))

    def allow_request(self, request: Request | HttpRequest, view: APIView | None) -> bool:
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


def throttled_page(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """The API's throttle (same class, same budget per client) on a plain Django view.

    Past the rate the page answers 429 with Retry-After, as the API does, before the view runs.
    """

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        throttle = AnonFixedWindowThrottle()
        if not throttle.allow_request(request, None):
            wait = math.ceil(throttle.wait() or 1)
            response = HttpResponse(
                f"Too many requests: retry in {wait} seconds.\n",
                status=429,
                content_type="text/plain; charset=utf-8",
            )
            response["Retry-After"] = str(wait)
            return response
        return view(request, *args, **kwargs)

    return wrapper
