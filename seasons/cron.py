"""Schedules' cron expressions: checked, and iterated in their time zone (croniter).

Occurrences are aware datetimes in the schedule's zone; across a DST change they are what
croniter defines (docs/schedules.md): a time inside the hour skipped in spring fires at the
first valid time after it, a time inside the hour repeated in autumn fires twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter


class CronError(ValueError):
    """A cron expression or time zone a schedule cannot use."""


def cron_check(expression: str) -> str:
    """The expression, if it has exactly 5 fields croniter accepts."""
    fields = expression.split()
    if len(fields) != 5:
        raise CronError(
            f"cron must have 5 fields (minute hour day-of-month month day-of-week), "
            f"got {len(fields)}: {expression!r}"
        )
    if not croniter.is_valid(expression):
        raise CronError(f"cron {expression!r} is not a valid cron expression")
    try:
        croniter(expression, datetime(2000, 1, 1, tzinfo=UTC)).get_next(datetime)
    except CroniterError as exc:
        raise CronError(f"cron {expression!r} never fires ({exc})") from exc
    return " ".join(fields)


def timezone_check(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    # OSError: a directory of the zone database ("Europe") or a file it cannot read.
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise CronError(f"unknown time zone {name!r} (an IANA name, e.g. Europe/Paris)") from exc


def cron_ticks(*, expression: str, zone: str, after: datetime) -> Iterator[datetime]:
    """Every occurrence strictly after ``after``, in order, as aware UTC datetimes."""
    it = croniter(cron_check(expression), after.astimezone(timezone_check(zone)))
    while True:
        yield it.get_next(datetime).astimezone(UTC)


def cron_next(*, expression: str, zone: str, after: datetime, count: int = 1) -> list[datetime]:
    """The next ``count`` occurrences after ``after`` (UTC)."""
    ticks = cron_ticks(expression=expression, zone=zone, after=after)
    return [next(ticks) for _ in range(count)]
