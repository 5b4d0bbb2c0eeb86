"""Argument types for the commands: a typo gets argparse's one-line error (exit 2), never a
traceback from deep inside the process it would have started."""

from __future__ import annotations

import math
from argparse import ArgumentTypeError
from collections.abc import Callable


def int_between(low: int, high: int) -> Callable[[str], int]:
    """A decimal integer from ``low`` to ``high``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if not low <= value <= high:
            raise ArgumentTypeError(f"must be {low} to {high}, got {value}")
        return value

    return parse


def number_between(low: float, high: float) -> Callable[[str], float]:
    """A finite number from ``low`` to ``high`` (``inf`` and ``nan`` parse as floats, and
    neither is a duration or a rate)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise ArgumentTypeError(f"must be a number, got {text!r}") from None
        if not math.isfinite(value) or not low <= value <= high:
            raise ArgumentTypeError(f"must be {low:.15g} to {high:.15g}, got {text}")
        return value

    return parse


# A database id (PostgreSQL's bigint): past it, the query itself fails.
ID_MAX = 2**63 - 1
# The longest wait or interval a command takes: a year. Longer overflows a datetime sum.
SECONDS_MAX = 366 * 24 * 3600.0
PORT_MAX = 65_535
