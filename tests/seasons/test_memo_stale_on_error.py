"""The process memo keeps serving the last value it loaded when a reload fails with a database
error, within the fallback, and tries the database again at most once per time to live."""

from __future__ import annotations

import pytest
from django.db import InterfaceError, OperationalError

from seasons.memo import ProcessMemo


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Loader:
    def __init__(self) -> None:
        self.calls = 0
        self.error: Exception | None = None
        self.value = "v1"

    def __call__(self) -> str:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return self.value


@pytest.fixture
def memo_parts(settings):
    settings.LEADERBOARD_SEASON_CACHE_SECONDS = 5
    settings.LEADERBOARD_SEASON_FALLBACK_SECONDS = 60
    clock = Clock()
    memo: ProcessMemo[int, str] = ProcessMemo(
        ttl_setting="LEADERBOARD_SEASON_CACHE_SECONDS",
        fallback_setting="LEADERBOARD_SEASON_FALLBACK_SECONDS",
        clock=clock,
    )
    return memo, clock, Loader()


def test_a_failed_reload_serves_the_last_value_and_retries_once_per_ttl(memo_parts) -> None:
    memo, clock, load = memo_parts
    assert memo.get(1, load) == "v1"
    clock.now += 6  # due for a reload
    load.error = OperationalError("connection refused")
    assert memo.get(1, load) == "v1"
    assert load.calls == 2
    # The failure counts as a reload: the next attempt waits a time to live, not one per read.
    clock.now += 4
    assert memo.get(1, load) == "v1"
    assert load.calls == 2
    clock.now += 2
    # A connection broken earlier in the request raises InterfaceError (not a DatabaseError).
    load.error = InterfaceError("connection already closed")
    assert memo.get(1, load) == "v1"
    assert load.calls == 3
    # PostgreSQL is back: the next reload takes the new value.
    clock.now += 6
    load.error, load.value = None, "v2"
    assert memo.get(1, load) == "v2"


def test_the_fallback_counts_from_the_last_successful_load(memo_parts) -> None:
    memo, clock, load = memo_parts
    memo.get(1, load)
    load.error = OperationalError("down")
    for _ in range(11):  # 55 s of failed reloads, one every 5 s
        clock.now += 5
        assert memo.get(1, load) == "v1"
    clock.now += 6  # 61 s after the last good load: nothing left to serve
    with pytest.raises(OperationalError):
        memo.get(1, load)


def test_a_key_never_loaded_raises_and_other_errors_are_not_swallowed(memo_parts) -> None:
    memo, clock, load = memo_parts
    load.error = OperationalError("down")
    with pytest.raises(OperationalError):
        memo.get(1, load)
    load.error = None
    memo.get(1, load)
    clock.now += 6
    load.error = ValueError("a bug, not an outage")
    with pytest.raises(ValueError, match="a bug"):
        memo.get(1, load)


def test_a_memoized_miss_is_kept_too(memo_parts) -> None:
    # An unknown season stays a 404 through an outage rather than turning into a 503.
    memo, clock, _ = memo_parts
    assert memo.get(1, lambda: None) is None
    clock.now += 6

    def down() -> None:
        raise OperationalError("down")

    assert memo.get(1, down) is None


def test_without_a_fallback_nothing_is_kept_past_the_ttl(settings) -> None:
    # The top-list snapshot memo (Redis reads) keeps no stale copies for an hour.
    settings.LEADERBOARD_SEASON_CACHE_SECONDS = 5
    clock = Clock()
    memo: ProcessMemo[int, str] = ProcessMemo(
        ttl_setting="LEADERBOARD_SEASON_CACHE_SECONDS", clock=clock
    )
    memo.get(1, lambda: "v1")
    clock.now += 6

    def down() -> str:
        raise OperationalError("down")

    with pytest.raises(OperationalError):
        memo.get(1, down)


def test_get_many_loads_only_what_is_missing_or_due_and_falls_back_only_when_all_is_held(
    memo_parts,
) -> None:
    memo, clock, _ = memo_parts
    asked: list[list[int]] = []
    error: list[Exception] = []

    def load(keys: list[int]) -> dict[int, str]:
        asked.append(keys)
        if error:
            raise error[0]
        return {key: f"v{key}@{clock.now:.0f}" for key in keys}

    assert memo.get_many([1, 2], load) == {1: "v1@1000", 2: "v2@1000"}
    clock.now += 3
    assert memo.get_many([1, 2, 3], load) == {1: "v1@1000", 2: "v2@1000", 3: "v3@1003"}
    assert asked == [[1, 2], [3]]
    clock.now += 3  # 1 and 2 are due, 3 is not
    error.append(OperationalError("connection refused"))
    assert memo.get_many([1, 2, 3], load) == {1: "v1@1000", 2: "v2@1000", 3: "v3@1003"}
    assert asked[-1] == [1, 2]
    # A key with nothing held cannot be served: the error is the caller's.
    with pytest.raises(OperationalError):
        memo.get_many([1, 4], load)
    error.clear()
    clock.now += 6
    assert memo.get_many([1, 4], load) == {1: "v1@1012", 4: "v4@1012"}
