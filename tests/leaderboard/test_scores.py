"""Each player's board score computed from PostgreSQL, held to the scoring rules' semantics."""

from __future__ import annotations

import itertools
import random
from datetime import timedelta

import pytest
from django.utils import timezone

from leaderboard.codec import CodecError
from leaderboard.models import MatchResult, PlayerBan, ScoringRule
from leaderboard.selectors.members import board_member_count, board_players_sample
from leaderboard.selectors.scores import (
    board_scores_chunks,
    board_scores_for_players,
    board_scores_top,
    board_scores_zadd_chunks,
    player_id_split,
)
from tests.helpers import as_board, expected_board, make_result, make_season

pytestmark = pytest.mark.django_db


def _random_results(season, *, players=40, results=300, seed=7):
    rng = random.Random(seed)
    made = []
    for _ in range(results):
        made.append(
            make_result(
                season=season,
                player_id=rng.randint(1, players),
                # Few distinct values so equal points at different times are common.
                points=rng.choice([0, 10, 20, 30, 50]),
                achieved_at=season.starts_at
                + timedelta(
                    days=rng.randint(0, 4),
                    seconds=rng.randint(0, 86399),
                    microseconds=rng.randint(0, 999_999),
                ),
            )
        )
    return made


@pytest.mark.parametrize("rule", [ScoringRule.BEST, ScoringRule.CUMULATIVE])
@pytest.mark.parametrize("resolution", [1, 60])
def test_aggregation_matches_the_rule_semantics(rule, resolution):
    season = make_season(rule=rule, time_resolution_seconds=resolution)
    made = _random_results(season)
    voided = made[:30]
    MatchResult.objects.filter(pk__in=[r.pk for r in voided]).update(voided_at=timezone.now())
    for r in voided:
        r.voided_at = timezone.now()
    PlayerBan.objects.create(season=season, player_id=3, reason="cheating")
    other = make_season(rule=rule)
    make_result(season=other, player_id=1, points=999)

    expected = expected_board(season, made, banned=[3])
    streamed = {
        s.player_id: s.score
        for chunk in board_scores_chunks(board=as_board(season), chunk_rows=7)
        for s in chunk
    }
    assert streamed == expected
    flat = [
        a
        for chunk in board_scores_zadd_chunks(board=as_board(season), chunk_bytes=64)
        for a in chunk
    ]
    assert {int(m): int(s) for s, m in zip(flat[::2], flat[1::2], strict=True)} == expected
    assert board_member_count(board=as_board(season)) == len(expected)
    assert_sorted_runs(season=season, day=None, expected=expected, runs=3)

    day = (season.starts_at + timedelta(days=2)).date()
    expected_day = expected_board(season, made, banned=[3], day=day)
    assert expected_day
    assert {
        s.player_id: s.score
        for c in board_scores_chunks(board=as_board(season), day=day)
        for s in c
    } == expected_day
    assert board_member_count(board=as_board(season), day=day) == len(expected_day)
    assert_sorted_runs(season=season, day=day, expected=expected_day, runs=4)

    top = board_scores_top(board=as_board(season), limit=5)
    assert [s.score for s in top] == sorted(expected.values(), reverse=True)[:5]
    some = [*list(expected)[:4], 3, 10_000]
    assert {
        p: s.score
        for p, s in board_scores_for_players(board=as_board(season), player_ids=some).items()
    } == {p: expected[p] for p in some if p in expected}
    sample = board_players_sample(board=as_board(season), size=10)
    assert len(sample) == 10
    assert set(sample) <= set(expected)


def assert_sorted_runs(*, season, day, expected, runs):
    """The rebuild's order: the same scores, as at most ``runs`` runs over disjoint ranges of
    player ids, each run sorted by score, highest first."""
    pairs = [
        (int(s), int(m))
        for chunk in board_scores_zadd_chunks(
            board=as_board(season), day=day, chunk_bytes=64, sorted_runs=runs
        )
        for s, m in zip(chunk[::2], chunk[1::2], strict=True)
    ]
    assert {m: s for s, m in pairs} == expected
    assert len(pairs) == len(expected)
    cuts = [0] + [i for i in range(1, len(pairs)) if pairs[i][0] > pairs[i - 1][0]] + [len(pairs)]
    assert 1 < len(cuts) - 1 <= runs
    spans = [
        (min(m for _, m in pairs[a:b]), max(m for _, m in pairs[a:b]))
        for a, b in itertools.pairwise(cuts)
    ]
    assert all(high < low for (_, high), (low, _) in itertools.pairwise(spans))


@pytest.mark.parametrize(
    ("low", "high", "runs", "bounds", "expected"),
    [
        # Equal widths without statistics; the last range ends at high.
        (1, 11, 3, [], [(1, 5), (5, 9), (9, 11)]),
        (1, 3, 5, [], [(1, 2), (2, 3)]),
        (7, 8, 4, [], [(7, 8)]),
        (1, 11, 1, [2, 3], [(1, 11)]),
        # Quantiles when enough statistics fall inside: clustered ids, ranges of equal counts.
        (1, 1001, 2, [1, 2, 3, 4, 5, 900], [(1, 4), (4, 1001)]),
        (1, 1001, 3, [0, 2, 3, 4, 5, 6, 7, 5000], [(1, 4), (4, 6), (6, 1001)]),
        # Statistics of other seasons' ids, outside this range: equal widths.
        (100, 200, 2, [1, 2, 3, 500], [(100, 150), (150, 200)]),
    ],
)
def test_player_id_split(low, high, runs, bounds, expected):
    assert player_id_split(low=low, high=high, runs=runs, bounds=bounds) == expected


def test_best_takes_the_earliest_time_of_the_max_and_cumulative_the_latest():
    best = make_season(rule=ScoringRule.BEST)
    cum = make_season(rule=ScoringRule.CUMULATIVE)
    for season in (best, cum):
        for hours, points in [(5, 50), (2, 50), (9, 10)]:
            make_result(
                season=season,
                player_id=1,
                points=points,
                achieved_at=season.starts_at + timedelta(hours=hours),
            )
    (b,) = board_scores_top(board=as_board(best), limit=10)
    assert (b.points, b.achieved_at) == (50, best.starts_at + timedelta(hours=2))
    assert b.score == as_board(best).codec.encode(points=50, elapsed_ticks=2 * 3600)
    (c,) = board_scores_top(board=as_board(cum), limit=10)
    assert (c.points, c.achieved_at) == (110, cum.starts_at + timedelta(hours=9))
    assert c.score == as_board(cum).codec.encode(points=110, elapsed_ticks=9 * 3600)


def test_cumulative_overflow_is_an_error_not_a_wrong_score():
    season = make_season(rule=ScoringRule.CUMULATIVE)
    max_points = as_board(season).codec.max_points
    make_result(season=season, player_id=1, points=max_points)
    make_result(season=season, player_id=1, points=1)
    with pytest.raises(CodecError, match="player 1"):
        list(board_scores_zadd_chunks(board=as_board(season)))
    with pytest.raises(CodecError, match="player 1"):
        list(board_scores_chunks(board=as_board(season)))
