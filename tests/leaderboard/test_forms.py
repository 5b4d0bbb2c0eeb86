"""The board page's query form: the API's rules, a default for each refused parameter."""

from __future__ import annotations

from datetime import date

import pytest
from django.http import QueryDict

from leaderboard.forms import BoardPageForm, BoardPageQuery
from leaderboard.serializers import MAX_START

TODAY = date(2026, 10, 14)  # a Wednesday of ISO week 2026-W42


def parse(query: str) -> tuple[BoardPageQuery, list[str]]:
    form = BoardPageForm(QueryDict(query), default_day=TODAY)
    return form.page_query(), form.messages()


def test_an_empty_query_is_the_season_top():
    query, messages = parse("")
    assert messages == []
    assert query == BoardPageQuery(
        period="season",
        start=1,
        day=TODAY,
        default_day=TODAY,
        iso_year=2026,
        iso_week=42,
        player_id=None,
        player_query="",
    )
    assert query.week == "2026-W42"


def test_each_period_reads_its_own_parameters():
    query, messages = parse("start=%202345%20&player=42")
    assert (messages, query.period, query.start, query.player_id) == ([], "season", 2345, 42)

    query, messages = parse("period=daily&day=2026-10-02&start=0&week=nope")
    # A day's list has no start and no week: they are not read, so not refused.
    assert (messages, query.period, query.day, query.start) == ([], "daily", date(2026, 10, 2), 1)

    query, messages = parse("period=weekly&week=2026-W40&day=nope")
    assert (messages, query.period, query.week, query.day) == ([], "weekly", "2026-W40", TODAY)

    query, messages = parse("period=daily&day=")
    assert (messages, query.day) == ([], TODAY)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("period=monthly", "'monthly' is not a period (season, daily or weekly)."),
        ("start=0", "Rank: Ensure this value is greater than or equal to 1."),
        ("start=abc", "Rank: A valid integer is required."),
        ("start=12.0", "Rank: A valid integer is required."),
        (
            f"start={MAX_START + 1}",
            f"Rank: Ensure this value is less than or equal to {MAX_START}.",
        ),
        ("period=daily&day=2026-1-2", "Day: must be a date as YYYY-MM-DD, got '2026-1-2'"),
        ("period=daily&day=2026-13-01", "Day: must be a date as YYYY-MM-DD, got '2026-13-01'"),
        # Its board would end past datetime's range (the page was a 500).
        ("period=daily&day=9999-12-31", "Day: must be a day before 9999-12-31, got '9999-12-31'"),
        (
            "period=weekly&week=2026-W60",
            "Week: must be an ISO week as YYYY-Www with a week that exists that year, "
            "got '2026-W60'",
        ),
        ("player=-1", "'-1' is not a player id (a positive integer)."),
        ("player=1e3", "'1e3' is not a player id (a positive integer)."),
        ("player=%00", "'\\x00' is not a player id (a positive integer)."),
    ],
)
def test_a_refused_parameter_says_why_and_falls_back_to_its_default(raw, message):
    query, messages = parse(raw)
    assert messages == [message]
    defaults, _ = parse("period=" + query.period)
    assert (query.start, query.day, query.week, query.player_id) == (
        defaults.start,
        defaults.day,
        defaults.week,
        defaults.player_id,
    )


def test_a_refused_period_shows_the_season_and_reads_its_start():
    query, messages = parse("period=x&start=0&player=7")
    assert query.period == "season"
    assert query.player_id == 7
    assert messages == [
        "'x' is not a period (season, daily or weekly).",
        "Rank: Ensure this value is greater than or equal to 1.",
    ]


def test_a_long_refused_value_is_cut_in_the_message():
    _, messages = parse("period=" + "x" * 500 + "&player=" + "9" * 5000)
    assert messages == [
        f"{'x' * 20!r} is not a period (season, daily or weekly).",
        f"{'9' * 40!r} is not a player id (a positive integer).",
    ]
