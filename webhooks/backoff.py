"""Retry timing: exponential backoff with jitter, and the clock the deliverer reads.

After the n-th failure in a row the next try waits ``min(cap, first * 2**(n-1))`` seconds,
drawn between half of that and all of it ("equal jitter"): an endpoint that comes back is not
hit by every deliverer at the same instant, and the wait still grows at least as fast as half
the exponential. The clock is injectable so that the 24-hour give-up is tested without waiting.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

Clock = Callable[[], float]  # unix seconds


def system_clock() -> float:
    return time.time()


def retry_delay(
    *, failures: int, first: float, cap: float, rng: random.Random | None = None
) -> float:
    """Seconds to wait after ``failures`` (>= 1) consecutive failures."""
    exponent = min(max(failures, 1) - 1, 62)
    ceiling = min(cap, first * 2.0**exponent)
    return (rng or random).uniform(ceiling / 2, ceiling)
