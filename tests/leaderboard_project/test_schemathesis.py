"""Schemathesis against the API in-process (the WSGI app): the schema at /api/schema tells the
truth about what the views take and answer.

For every operation, bounded, derandomized examples generated from the schema itself: no server
error, every status and content type and header the schema lists, every body matching its
schema, and no schema-valid request refused (400) for the read API. Season 1 exists with a board
in Redis, so the smallest ids (which generation always tries) reach the boards, not only 404.

The ingestion door runs with a real token against a topic of its own; its positive bodies are
not required to be accepted: each item is also checked against its season and board (exists,
open, inside the window, not in the future), which no schema can state, and the 400 lists each
item's reason (the schema says so). The join of a tournament board runs with the token too; its
answer (201, 200, 404, 409) depends on the board's state, which no schema can state either.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase
from hypothesis import settings as hypothesis_settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from ingestion.services import game_server_token_create
from leaderboard.models import Board, Cohort, CohortMember
from leaderboard_project.wsgi import application
from seasons.models import SeasonStatus
from tests.factories import SeasonFactory

from ..leaderboard.board_fixtures import write_daily_board, write_season_board

START = datetime(2026, 10, 1, tzinfo=UTC)
DOOR = "/api/match-results"
# A game server's other call with the same token: its examples are 201, 200, 404 or 409 by the
# board's state, which no schema can state either.
JOIN = "/api/seasons/{season}/boards/{board}/players/{player}/join"
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    positive_data_acceptance,
]


@pytest.fixture
def _wsgi_keeps_the_test_transaction() -> Iterator[None]:
    # A real WSGI handler closes "old" connections at each request's start and end, and a
    # connection inside the test's transaction counts as one: as Django's test client does,
    # keep them open for the requests made in-process.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def door_token(_wsgi_keeps_the_test_transaction, settings, board_redis, kafka_topic_factory) -> str:
    """Season 1 with its boards in Redis, and a game-server token; the door's topic."""
    # The throttle would answer 429 (documented) long before the examples run out.
    settings.API_ANON_THROTTLE_RATE = "off"
    settings.KAFKA_MATCH_RESULTS_TOPIC = kafka_topic_factory("schemathesis")
    season = SeasonFactory.create(
        id=1, starts_at=START, ends_at=START + timedelta(days=30), status=SeasonStatus.ACTIVE
    )
    write_season_board(board_redis, season)
    write_daily_board(board_redis, season, START.date(), {1: (10, 0), 2: (20, 0)})
    # The main board ranks in cohorts of 4 too (players 1 and 2 in cohort 1, as ingestion
    # would have put them), so the cohort reads reach 200s; and it is a league board (its
    # cohort in the silver tier), so every entry carries a tier and cohort entries a movement.
    main = Board.objects.get(season=season, slug="main")
    main.cohort_size = 4
    main.tiers = ["bronze", "silver"]
    main.promote_percent = main.relegate_percent = 50
    # And a tournament (players join, 3 seats, 2 attempts): entries carry attempts.
    main.join_required, main.max_size, main.max_attempts = True, 3, 2
    main.save(
        update_fields=[
            "cohort_size",
            "tiers",
            "promote_percent",
            "relegate_percent",
            "join_required",
            "max_size",
            "max_attempts",
        ]
    )
    cohort = Cohort.objects.create(board=main, number=1, tier=1, members=2)
    CohortMember.objects.bulk_create(
        [CohortMember(board=main, cohort=cohort, player_id=p) for p in (1, 2)]
    )
    return game_server_token_create(name="schemathesis")[1]


# Loaded at collection, through the app itself (generating the schema needs no database).
# Not schemathesis.pytest.from_fixture: its lazy loader sets pytest's private Node._nodeid,
# which pytest 9 no longer has.
schema = schemathesis.openapi.from_wsgi("/api/schema", application)


@pytest.mark.django_db
@schema.parametrize()
@hypothesis_settings(
    max_examples=25,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_the_api_keeps_the_schemas_promises(case, door_token) -> None:
    if case.path in (DOOR, JOIN):
        case.call_and_validate(
            headers={"Authorization": f"Bearer {door_token}"},
            checks=[c for c in CHECKS if c is not positive_data_acceptance],
        )
    else:
        case.call_and_validate(checks=CHECKS)
