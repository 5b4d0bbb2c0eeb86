"""The batch check's shortcut against the schema's checks: a message with tiebreakers passes the
batch exactly when message_check_board passes it, on boards with and without columns."""

from __future__ import annotations

import itertools
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from ingestion.schema import MatchResultMessage, MessageRejected, message_check_board
from ingestion.services.checks import messages_check_boards
from leaderboard.codec import TIEBREAK_VALUE_MAX
from leaderboard.models import Board, TiebreakColumn
from tests.factories import board_factory
from tests.helpers import make_live_season

pytestmark = pytest.mark.django_db

TIEBREAKERS = [
    None,
    {},
    {"kills": 1},
    {"kills": 1, "deaths": 0},
    {"deaths": 0, "kills": TIEBREAK_VALUE_MAX},
    {"kills": TIEBREAK_VALUE_MAX + 1, "deaths": 0},
    {"kills": -1, "deaths": 0},
    {"kills": 1, "deaths": 0, "assists": 2},
]


def test_the_batch_passes_exactly_what_the_schema_passes() -> None:
    season = make_live_season()
    columns = (TiebreakColumn("kills", "desc"), TiebreakColumn("deaths", "asc"))
    board_factory(season, "arena", tiebreaks=columns)
    at = timezone.now() - timedelta(minutes=1)
    messages = [
        MatchResultMessage(
            uuid.uuid4(), 7, season.id, points, at, board=slug, tiebreakers=tiebreakers
        )
        for slug, points, tiebreakers in itertools.product(
            ["main", "arena"], [10, TIEBREAK_VALUE_MAX, TIEBREAK_VALUE_MAX + 1], TIEBREAKERS
        )
    ]
    checked = messages_check_boards(messages=messages)
    boards = {b.slug: b for b in Board.objects.filter(season=season)}
    for message, board_id in zip(messages, checked.board_ids, strict=True):
        try:
            message_check_board(message, season, boards[message.board])
            expected = boards[message.board].id
        except MessageRejected:
            expected = None
        assert board_id == expected, message
    # Both kinds happen: the comparison above is not vacuous.
    assert {b is None for b in checked.board_ids} == {True, False}
