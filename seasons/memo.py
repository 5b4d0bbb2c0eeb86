"""One small per-process memo with a time to live, for the read path's lookups.

The hot endpoints resolve a season and a board on every request; a memo per process keeps them
off PostgreSQL. Misses are memoized too (a client probing unknown ids in a loop must not become
one SQL query per request), and the size is bounded. The time to live is read from settings at
each insertion, never at import.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from cachetools import TLRUCache
from django.conf import settings

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_MISSING = object()


class ProcessMemo(Generic[K, V]):
    def __init__(self, *, ttl_setting: str, maxsize: int = 10_000) -> None:
        self._ttl_setting = ttl_setting

        def expires(_key: object, _value: object, now: float) -> float:
            return now + float(getattr(settings, self._ttl_setting))

        self._cache: TLRUCache[K, V] = TLRUCache(maxsize=maxsize, ttu=expires)
        # cachetools' caches are not thread-safe; gunicorn threads and the consumer share them.
        self._lock = threading.Lock()

    def get(self, key: K, load: Callable[[], V]) -> V:
        """The memoized value of ``key``, or ``load()``'s (memoized) when absent or expired."""
        with self._lock:
            value = self._cache.get(key, _MISSING)
        if value is not _MISSING:
            return value  # type: ignore[return-value]
        value = load()
        with self._lock:
            self._cache[key] = value
        return value

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()


_memos: list[ProcessMemo[object, object]] = []


def process_memo(*, ttl_setting: str, maxsize: int = 10_000) -> ProcessMemo[K, V]:
    """A memo registered for ``process_memos_clear`` (tests; a process that must see a change)."""
    memo: ProcessMemo[K, V] = ProcessMemo(ttl_setting=ttl_setting, maxsize=maxsize)
    _memos.append(memo)  # type: ignore[arg-type]
    return memo


def process_memos_clear() -> None:
    for memo in _memos:
        memo.clear()
