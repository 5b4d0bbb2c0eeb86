"""The signature every webhook request carries, and its check (docs/webhooks.md, "Signature").

``X-Leaderboard-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`` keyed by
the endpoint's secret. The time is inside what is signed, so a receiver that refuses times
older than a few minutes cannot be replayed an old request; the raw body is signed, so the
receiver verifies the bytes it received before parsing them.
"""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_HEADER = "X-Leaderboard-Signature"
# The ids of the events in the body, comma-separated, in the body's order.
EVENT_IDS_HEADER = "X-Leaderboard-Event-Ids"
# One id per batch, the same on every retry of it (a receiver may deduplicate batches by it).
DELIVERY_HEADER = "X-Leaderboard-Delivery"
# What a receiver should accept between the signed time and its own clock.
DEFAULT_TOLERANCE_SECONDS = 300


def signature_compute(*, secret: str, timestamp: int, body: bytes) -> str:
    message = str(int(timestamp)).encode("ascii") + b"." + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signature_header(*, secret: str, timestamp: int, body: bytes) -> str:
    """The header's value for ``body`` sent at ``timestamp``."""
    v1 = signature_compute(secret=secret, timestamp=timestamp, body=body)
    return f"t={int(timestamp)},v1={v1}"


# Seconds since 1970 stay below 10^12 for thirty thousand years.
_MAX_T_DIGITS = 12


class SignatureInvalid(Exception):
    pass


def signature_verify(
    *,
    secret: str,
    header: str | None,
    body: bytes,
    now: float,
    tolerance_seconds: float = DEFAULT_TOLERANCE_SECONDS,
) -> int:
    """Check a received header against ``body``; the signed time, or SignatureInvalid saying
    why. Several ``v1`` values are accepted (a sender rotating its secret may send two)."""
    if not header:
        raise SignatureInvalid(f"no {SIGNATURE_HEADER} header")
    timestamp: int | None = None
    candidates: list[str] = []
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        # ASCII digits of a time in seconds, and ASCII signatures: anything else a sender may
        # write (thousands of digits, superscripts, non-ASCII text) is malformed, not a crash.
        if name == "t" and value.isascii() and value.isdigit() and len(value) <= _MAX_T_DIGITS:
            timestamp = int(value)
        elif name == "v1" and value.isascii():
            candidates.append(value)
    if timestamp is None or not candidates:
        raise SignatureInvalid("malformed signature header (needs t=<seconds>,v1=<hex>)")
    if abs(now - timestamp) > tolerance_seconds:
        raise SignatureInvalid(f"signed {int(now - timestamp)} s from now: outside the tolerance")
    expected = signature_compute(secret=secret, timestamp=timestamp, body=body)
    if not any(hmac.compare_digest(expected, candidate) for candidate in candidates):
        raise SignatureInvalid("signature does not match the body")
    return timestamp
