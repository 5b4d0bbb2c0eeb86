"""A typo on a command's line is argparse's one-line error, before the command starts anything."""

from __future__ import annotations

from argparse import ArgumentTypeError

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from leaderboard.management.arguments import int_between, number_between


@pytest.mark.parametrize("text", ["0", "11", "x", "1.5", ""])
def test_int_between_refuses_outside_or_not_an_integer(text: str) -> None:
    with pytest.raises(ArgumentTypeError):
        int_between(1, 10)(text)


@pytest.mark.parametrize("text", ["inf", "-inf", "nan", "NaN", "-0.1", "10.01", "x"])
def test_number_between_refuses_non_finite_and_outside(text: str) -> None:
    with pytest.raises(ArgumentTypeError):
        number_between(0, 10)(text)


def test_the_bounds_themselves_are_taken() -> None:
    assert int_between(1, 10)("1") == 1
    assert int_between(1, 10)("10") == 10
    assert number_between(0, 10)("0") == 0.0
    assert number_between(0, 10)("1e1") == 10.0


# Each of these ended in a traceback from inside the process it started (a Kafka consumer
# with max_poll_records=0, a simulator sleeping 1/inf, a datetime overflow, a socket bind).
@pytest.mark.parametrize(
    ("command", "argv", "said"),
    [
        ("consume_match_results", ["--max-poll-records", "0"], "--max-poll-records: must be 1"),
        ("consume_match_results", ["--stats-interval", "nan"], "--stats-interval"),
        ("consume_match_results", ["--metrics-port", "70000"], "--metrics-port"),
        ("simulate_matches", ["--season", "1", "--rate", "inf"], "--rate"),
        ("simulate_matches", ["--season", "1", "--duration", "-1"], "--duration"),
        ("simulate_matches", ["--season", "1", "--duplicates", "nan"], "--duplicates"),
        ("close_season", ["--season", "1", "--grace-seconds", "10" * 10], "--grace-seconds"),
        ("close_season", ["--season", "1", "--timeout", "inf"], "--timeout"),
        ("serve_board_stream", ["--port", "70000"], "--port: must be 0 to 65535"),
        ("deliver_webhooks", ["--stats-interval", "-1"], "--stats-interval"),
        ("bootstrap_demo", ["--web-port", "0"], "--web-port"),
    ],
)
def test_a_typo_is_refused_before_the_command_runs(
    command: str, argv: list[str], said: str
) -> None:
    with pytest.raises(CommandError, match=said):
        call_command(command, *argv)
