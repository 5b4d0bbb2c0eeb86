"""The per-process memo of cohorts' members is bounded by the player ids it holds: a client
walking a board's cohorts of 1,000 kept 10,000 of them, about 400 MB per web worker."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from leaderboard.selectors import cohorts


def test_the_member_memo_holds_at_most_a_million_ids() -> None:
    board: Any = SimpleNamespace(id=987_654, cohort_size=1000)
    cohorts._Memos().clear()
    try:
        for number in range(1, 2001):
            members = cohorts._Members(None, tuple(range(number * 1000, number * 1000 + 1000)))
            cohorts._members_memoize(board, number, members)
        assert cohorts._full.currsize <= 1_000_000
        assert len(cohorts._full) == 1000  # the most recent cohorts, whole
        assert (board.id, 2000) in cohorts._full
    finally:
        cohorts._Memos().clear()
