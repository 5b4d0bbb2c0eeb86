"""Where a webhook may be sent: the SSRF rules (docs/webhooks.md, "SSRF").

An endpoint's URL is staff input, but what it names is decided by DNS at delivery time, so the
check happens twice:

- when the URL is registered (``target_url_check``): http or https, a host, no credentials;
  an IP literal or a ``localhost`` name must be a public address;
- at every delivery (``target_resolve``): the host name is resolved, **every** address it
  resolves to must be public, and the connection is then made to the address that was checked
  (``Target.address``), never by resolving the name a second time (which a DNS answer with a
  short TTL could point somewhere else: DNS rebinding).

"Public" is ``ipaddress``'s ``is_global`` (which leaves out loopback, the private ranges,
link-local including the cloud metadata address 169.254.169.254, shared address space
100.64.0.0/10, documentation and reserved ranges) and not multicast; IPv6 addresses that
embed an IPv4 one (IPv4-mapped, IPv4-translated, 6to4, Teredo, NAT64's well-known prefix) are
judged by that one too, and NAT64's local-use prefix (64:ff9b:1::/48) is private. With
``WEBHOOK_ALLOW_PRIVATE=true`` (the local demo, the tests) every unicast address is allowed.
Redirects are never followed (transport.py): a redirect to an internal address would pass
every check above.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# host, port -> the addresses it resolves to (injectable: the tests' DNS).
Resolver = Callable[[str, int], Sequence[str]]


class TargetRefused(Exception):
    """The URL may not be delivered to; the message says why."""


@dataclass(frozen=True, slots=True)
class Target:
    scheme: str  # "http" or "https"
    host: str  # the URL's host name (Host header, TLS server name)
    port: int
    path: str  # path and query, as sent in the request line
    address: str  # the checked IP address the connection goes to

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


# IPv6 prefixes whose last 32 bits are an IPv4 address the packet goes to: NAT64's well-known
# prefix (RFC 6052) and IPv4-translated addresses (RFC 2765). ipaddress calls both global.
_IPV4_IN_LOW_32 = (
    ipaddress.IPv6Network("64:ff9b::/96"),
    ipaddress.IPv6Network("::ffff:0:0:0/96"),
)
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")  # RFC 8215: a network's own translator


def address_refusal(address: IPAddress, *, allow_private: bool) -> str | None:
    """Why ``address`` may not be a webhook's target, or None when it may."""
    if address.is_multicast:
        return "a multicast address"
    if address.is_unspecified:
        return "the unspecified address"
    if allow_private:
        return None
    if isinstance(address, ipaddress.IPv6Address):
        if address in _NAT64_LOCAL:
            return "a local-use NAT64 address"
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is None and address.teredo is not None:
            embedded = address.teredo[1]
        if embedded is None and any(address in prefix for prefix in _IPV4_IN_LOW_32):
            # A NAT64 gateway (DNS64 networks) or a translator reaches this IPv4 address.
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None:
            inner = address_refusal(embedded, allow_private=False)
            if inner is not None:
                return f"{inner} (inside {address})"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_private:
        return "a private address"
    if not address.is_global:
        return "not a public address"
    return None


def _split(url: str) -> tuple[str, str, int, str]:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise TargetRefused(f"not a valid URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in {"http", "https"}:
        raise TargetRefused("the URL must be http or https")
    if parts.username is not None or parts.password is not None:
        raise TargetRefused("the URL must not carry credentials (user:password@)")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise TargetRefused("the URL has no host")
    try:
        # An internationalized name in its ASCII form (IDNA): what DNS resolves, and what the
        # Host header and the request line can carry (they take ASCII only).
        host = host.encode("idna").decode("ascii")
    except UnicodeError as exc:
        raise TargetRefused(f"{host!r} is not a valid host name: {exc}") from None
    if port is None:
        port = 443 if scheme == "https" else 80
    path = parts.path or "/"
    if parts.query:
        path = f"{path}?{parts.query}"
    return scheme, host, port, quote(path, safe=_PATH_SAFE)


# Kept as the URL writes them: RFC 3986's reserved characters and "%" (escapes already made).
# Anything else (non-ASCII text, a space) is percent-encoded as UTF-8: the request line takes
# neither, and http.client raised on them inside the worker.
_PATH_SAFE = "/%:@!$&'()*+,;=?~._-[]"


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def target_url_check(url: str, *, allow_private: bool) -> None:
    """Refuse, at registration, a URL that can never be delivered to (TargetRefused)."""
    _, host, _, _ = _split(url)
    literal = _literal(host)
    if literal is not None:
        reason = address_refusal(literal, allow_private=allow_private)
        if reason is not None:
            raise TargetRefused(f"{host} is {reason}")
    elif not allow_private and (host == "localhost" or host.endswith(".localhost")):
        raise TargetRefused(f"{host} is a loopback name")


def target_resolve(url: str, *, allow_private: bool, resolver: Resolver) -> Target:
    """The address to deliver ``url`` to, checked; TargetRefused if any address of the host is
    refused (one bad address among good ones is refused too: the next lookup may pick it)."""
    scheme, host, port, path = _split(url)
    literal = _literal(host)
    if literal is not None:
        addresses: Sequence[str] = [str(literal)]
    else:
        try:
            addresses = resolver(host, port)
        except (OSError, UnicodeError) as exc:
            raise TargetRefused(f"{host} does not resolve: {exc}") from None
        if not addresses:
            raise TargetRefused(f"{host} does not resolve")
    checked: list[str] = []
    for raw in addresses:
        address = ipaddress.ip_address(raw.split("%", 1)[0])
        reason = address_refusal(address, allow_private=allow_private)
        if reason is not None:
            shown = host if literal is not None else f"{host} resolves to {address}, which"
            raise TargetRefused(f"{shown} is {reason}")
        checked.append(str(address))
    return Target(scheme=scheme, host=host, port=port, path=path, address=checked[0])
