"""Who may see the operators' views: /metrics, /metrics.json and /healthz's details.

An operator is a client whose address lies in ``METRICS_ALLOWED_NETWORKS`` (Prometheus, a load
balancer, someone on the internal network) or a logged-in active staff member (the admin).

The address is the one the read API's throttle trusts (``leaderboard.throttling.client_address``):
REMOTE_ADDR, or behind ``API_TRUSTED_PROXY_COUNT`` proxies the X-Forwarded-For entry the
outermost of them wrote. REMOTE_ADDR alone would be the proxy's own (private) address for every
request that came through it, so the public would pass; the whole header would let a client
write its own address. A scraper that reaches the web process directly, past the proxies, sends
no such header and is known by REMOTE_ADDR.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Callable, Sequence
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from leaderboard.throttling import client_address
from seasons.memo import DATABASE_UNREACHABLE

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

OPERATORS_ONLY_DETAIL = (
    "served to the internal network (METRICS_ALLOWED_NETWORKS) and to logged-in staff only"
)


@functools.cache
def _networks(entries: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(entry) for entry in entries)


def address_allowed(address: str, networks: Sequence[str]) -> bool:
    """Whether ``address`` (text) lies in one of ``networks`` (CIDRs); False if not an address."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    # A dual-stack listener reports an IPv4 client as ::ffff:a.b.c.d.
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip.version == net.version and ip in net for net in _networks(tuple(networks)))


def request_client_address(request: HttpRequest) -> str:
    """The client's address as the throttle trusts it (django-axes' AXES_CLIENT_IP_CALLABLE)."""
    return client_address(request.META)


def _is_staff(request: HttpRequest) -> bool:
    try:
        user = request.user
        return bool(user.is_authenticated and user.is_active and user.is_staff)
    except DATABASE_UNREACHABLE:
        # The session lives in PostgreSQL: while it is down nobody is staff, and /healthz
        # still answers (its short form) instead of a 503 page.
        return False


def request_from_operator(request: HttpRequest) -> bool:
    """A client from ``METRICS_ALLOWED_NETWORKS`` or a logged-in active staff member."""
    if address_allowed(client_address(request.META), settings.METRICS_ALLOWED_NETWORKS):
        return True
    return _is_staff(request)


def operators_only(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """403 with a JSON message for anyone but an operator, before the view runs."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request_from_operator(request):
            return JsonResponse({"detail": OPERATORS_ONLY_DETAIL}, status=403)
        return view(request, *args, **kwargs)

    return wrapper
