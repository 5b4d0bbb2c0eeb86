"""One small per-process memo with a time to live, for the read path's lookups.

The hot endpoints resolve a season and a board on every request; a memo per process keeps them
off PostgreSQL. Misses are memoized too (a client probing unknown ids in a loop must not become
one SQL query per request), and the size is bounded. The time to live is read from settings at
each insertion, never at import.

Stale on error: the boards live in Redis, so a read needs PostgreSQL only to resolve its season
and board. When a value is due for reloading and the load fails because PostgreSQL cannot be
reached (``DATABASE_UNREACHABLE``), the memo keeps serving
the last value it loaded, for up to its fallback (``LEADERBOARD_SEASON_FALLBACK_SECONDS`` for
the seasons and boards) after that load,
and tries the database again at most once per time to live per key (so an outage costs one
failed connection attempt per key every few seconds, not one per request). A value never
loaded still raises: the caller answers 503.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from cachetools import TLRUCache
from django.conf import settings
from django.db import InterfaceError, OperationalError

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

logger = logging.getLogger(__name__)

# What PostgreSQL being down or unreachable raises: OperationalError for a refused, dropped or
# timed-out connection, InterfaceError for a connection that broke earlier in the same request.
# Not DatabaseError as a whole: a DataError or ProgrammingError is a bug, and must stay a 500
# rather than pass for an outage.
DATABASE_UNREACHABLE: tuple[type[Exception], ...] = (OperationalError, InterfaceError)


@dataclass(slots=True)
class _Entry(Generic[V]):
    value: V
    # The clock's time after which the value is reloaded (it is still served if that fails).
    fresh_until: float


class ProcessMemo(Generic[K, V]):
    def __init__(
        self,
        *,
        ttl_setting: str,
        fallback_setting: str | None = None,
        maxsize: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl_setting = ttl_setting
        self._fallback_setting = fallback_setting
        self._clock = clock

        def expires(_key: object, _value: object, now: float) -> float:
            # An entry outlives its freshness by the fallback: the value a failed reload keeps
            # serving. Never shorter than the freshness itself.
            return now + max(self._ttl(), self._fallback())

        self._cache: TLRUCache[K, _Entry[V]] = TLRUCache(maxsize=maxsize, ttu=expires, timer=clock)
        # cachetools' caches are not thread-safe; gunicorn threads and the consumer share them.
        self._lock = threading.Lock()

    def _ttl(self) -> float:
        return float(getattr(settings, self._ttl_setting))

    def _fallback(self) -> float:
        if self._fallback_setting is None:
            return 0.0
        return float(getattr(settings, self._fallback_setting))

    def get(self, key: K, load: Callable[[], V]) -> V:
        """The memoized value of ``key``, or ``load()``'s (memoized) when absent or expired.

        When ``load()`` raises one of ``DATABASE_UNREACHABLE`` and an earlier value is
        still held (within the fallback), that value is returned instead and the next reload
        waits one time to live; without an earlier value the error propagates.
        """
        with self._lock:
            entry = self._cache.get(key)
        now = self._clock()
        if entry is not None and now < entry.fresh_until:
            return entry.value
        try:
            value = load()
        except DATABASE_UNREACHABLE as exc:
            if entry is None:
                raise
            logger.warning(
                "database unavailable (%s): serving the last known value of %r", exc, key
            )
            with self._lock:
                # In place: the entry keeps its original expiry (the fallback counts from the
                # last successful load, not from each failure).
                entry.fresh_until = now + self._ttl()
            return entry.value
        with self._lock:
            self._cache[key] = _Entry(value=value, fresh_until=self._clock() + self._ttl())
        return value

    def get_many(self, keys: Sequence[K], load: Callable[[list[K]], dict[K, V]]) -> dict[K, V]:
        """``get`` for many keys at once: ``load`` is called once, with the keys absent or
        expired, and must answer each of them. When it raises one of
        ``DATABASE_UNREACHABLE`` and every one of them still holds an earlier value, those
        are served as ``get`` serves one; otherwise the error propagates."""
        now = self._clock()
        with self._lock:
            held = {key: self._cache.get(key) for key in keys}
        found = {k: e.value for k, e in held.items() if e is not None and now < e.fresh_until}
        due = [key for key in held if key not in found]
        if not due:
            return found
        try:
            loaded = load(due)
        except DATABASE_UNREACHABLE as exc:
            stale = {key: held[key] for key in due}
            if any(entry is None for entry in stale.values()):
                raise
            logger.warning(
                "database unavailable (%s): serving the last known values of %d keys",
                exc,
                len(due),
            )
            with self._lock:
                for entry in stale.values():
                    entry.fresh_until = now + self._ttl()  # type: ignore[union-attr]
            return {**found, **{key: entry.value for key, entry in stale.items()}}  # type: ignore[union-attr]
        fresh_until = self._clock() + self._ttl()
        with self._lock:
            for key in due:
                self._cache[key] = _Entry(value=loaded[key], fresh_until=fresh_until)
        return {**found, **{key: loaded[key] for key in due}}

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()


class Clearable(Protocol):
    def clear(self) -> None: ...


_memos: list[Clearable] = []


def process_memo(
    *, ttl_setting: str, fallback_setting: str | None = None, maxsize: int = 10_000
) -> ProcessMemo[K, V]:
    """A memo registered for ``process_memos_clear`` (tests; a process that must see a change).

    ``fallback_setting`` names the setting of how long a value loaded from PostgreSQL is still
    served while it is unreachable; None (memos of Redis reads, e.g. the top-list snapshots)
    keeps nothing past the time to live.
    """
    memo: ProcessMemo[K, V] = ProcessMemo(
        ttl_setting=ttl_setting, fallback_setting=fallback_setting, maxsize=maxsize
    )
    _memos.append(memo)
    return memo


def process_state_register(state: Clearable) -> None:
    """Register per-process state that is not a ``ProcessMemo`` (the top-list snapshots) for
    ``process_memos_clear``."""
    _memos.append(state)


def process_memos_clear() -> None:
    for memo in _memos:
        memo.clear()
