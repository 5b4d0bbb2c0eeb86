from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from django.core.exceptions import ValidationError
from django.db import connection, transaction

from leaderboard.services.results import LOCK_BOARDS_SQL
from seasons.models import Season, SeasonStatus
from seasons.selectors import season_list_active
from seasons.services import season_status_transition, season_statuses_sync
from tests.factories import SeasonFactory
from tests.helpers import main_board_id, subprocess_database_url

START = datetime(2026, 10, 1, tzinfo=UTC)
END = START + timedelta(days=30)


def status(season_id: int) -> str:
    return Season.objects.get(id=season_id).status


@pytest.mark.django_db
def test_sync_moves_seasons_forward_as_dates_pass() -> None:
    season = SeasonFactory.create(starts_at=START, ends_at=END)

    result = season_statuses_sync(now=START - timedelta(seconds=1))
    assert (result.activated, result.closing) == ((), ())
    assert status(season.id) == SeasonStatus.SCHEDULED

    result = season_statuses_sync(now=START)
    assert result.activated == (season.id,)
    assert status(season.id) == SeasonStatus.ACTIVE
    assert season_list_active() == [Season.objects.get(id=season.id)]

    assert season_statuses_sync(now=START + timedelta(days=1)).activated == ()

    result = season_statuses_sync(now=END)
    assert result.closing == (season.id,)
    closing = Season.objects.get(id=season.id)
    assert closing.status == SeasonStatus.CLOSING
    assert closing.closing_since == END
    assert season_list_active() == []
    assert [s.id for s in season_list_active(include_closing=True)] == [season.id]

    # Nothing but the close-out closes a season.
    season_statuses_sync(now=END + timedelta(days=10))
    assert status(season.id) == SeasonStatus.CLOSING


@pytest.mark.django_db
def test_a_scheduled_season_whose_end_passed_goes_straight_to_closing() -> None:
    season = SeasonFactory.create(starts_at=START, ends_at=END)
    result = season_statuses_sync(now=END + timedelta(hours=1))
    assert (result.activated, result.closing) == ((), (season.id,))
    assert status(season.id) == SeasonStatus.CLOSING


@pytest.mark.django_db
def test_sync_never_moves_a_season_back() -> None:
    season = SeasonFactory.create(starts_at=START, ends_at=END, status=SeasonStatus.CLOSED)
    early = SeasonFactory.create(starts_at=START, ends_at=END, status=SeasonStatus.ACTIVE)
    season_statuses_sync(now=START - timedelta(days=1))
    assert status(season.id) == SeasonStatus.CLOSED
    assert status(early.id) == SeasonStatus.ACTIVE


@pytest.mark.django_db
def test_staff_transitions_are_validated() -> None:
    now = START + timedelta(days=1)
    season = SeasonFactory.create(starts_at=START, ends_at=END)
    assert season_status_transition(season_id=season.id, to_status="active", now=now).status == (
        "active"
    )
    with pytest.raises(ValidationError, match="only by its close-out"):
        season_status_transition(season_id=season.id, to_status="closed", now=now)
    with pytest.raises(ValidationError, match="cannot go from active to scheduled"):
        season_status_transition(season_id=season.id, to_status="scheduled", now=now)

    closing = season_status_transition(season_id=season.id, to_status="closing", now=now)
    assert (closing.status, closing.closing_since) == ("closing", now)
    # Reopening is possible before the end, not after it.
    reopened = season_status_transition(season_id=season.id, to_status="active", now=now)
    assert (reopened.status, reopened.closing_since) == ("active", None)
    season_status_transition(season_id=season.id, to_status="closing", now=now)
    with pytest.raises(ValidationError, match="move its end first"):
        season_status_transition(season_id=season.id, to_status="active", now=END)

    Season.objects.filter(id=season.id).update(status=SeasonStatus.CLOSED)
    for target in ("scheduled", "active", "closing"):
        with pytest.raises(ValidationError, match="cannot go from closed"):
            season_status_transition(season_id=season.id, to_status=target, now=now)
    with pytest.raises(ValidationError, match="does not exist"):
        season_status_transition(season_id=999_999, to_status="active", now=now)
    with pytest.raises(ValidationError, match="unknown status"):
        season_status_transition(season_id=season.id, to_status="paused", now=now)


@pytest.mark.django_db(transaction=True)
def test_a_batch_being_ingested_never_holds_up_the_seasons_lifecycle() -> None:
    """Ingestion locks a batch's seasons FOR KEY SHARE for the length of the batch; season work
    locks them FOR NO KEY UPDATE, which does not conflict: the status sync (SKIP LOCKED) still
    sees the season, and a staff transition does not wait for the batch."""
    ending = SeasonFactory.create(starts_at=START, ends_at=END, status=SeasonStatus.ACTIVE)
    later = END + timedelta(days=1)
    staff = SeasonFactory.create(starts_at=START, ends_at=later, status=SeasonStatus.ACTIVE)
    batch = psycopg.connect(subprocess_database_url())  # a consumer's store, mid-batch
    try:
        batch.execute(LOCK_BOARDS_SQL, ["closed", [main_board_id(ending), main_board_id(staff)]])
        assert season_statuses_sync(now=END).closing == (ending.id,)
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL lock_timeout = '2s'")
            season_status_transition(season_id=staff.id, to_status=SeasonStatus.CLOSING, now=END)
    finally:
        batch.rollback()
        batch.close()
    assert status(ending.id) == status(staff.id) == SeasonStatus.CLOSING
