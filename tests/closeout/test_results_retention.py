"""Closed seasons' match results past their retention: deleted in batches once the history is
archived, leaving what players and staff read of the season (closeout/services/retention.py)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.utils import timezone

from closeout.models import FinalStanding, HistoryArchive, HistoryEntry
from closeout.services import (
    season_close,
    season_history_archive,
    season_results_prune,
    season_standings_correct,
    season_standings_review,
    seasons_history_due,
    seasons_results_prune_due,
)
from leaderboard.models import Board, MatchResult, RefusalCode, RefusedResult
from seasons.models import Season, SeasonStatus
from tests.factories import MatchResultFactory, SeasonFactory, board_factory

START = datetime(2026, 9, 1, tzinfo=UTC)

pytestmark = pytest.mark.usefixtures("drained_match_results")


def _closed(*, offset: int, closed_days_ago: int, results: int = 12) -> Season:
    """A season of two boards (one a tournament with refused results) with ``results`` results
    each, closed out, its history archived, its close-out dated ``closed_days_ago`` days ago."""
    starts = START + timedelta(days=offset)
    season = SeasonFactory.create(
        starts_at=starts, ends_at=starts + timedelta(days=7), status=SeasonStatus.ACTIVE
    )
    boards = [
        Board.objects.get(season=season, slug="main"),
        board_factory(season, "cup", max_attempts=3),
    ]
    for board in boards:
        for n in range(results):
            MatchResultFactory.create(
                season=season, board=board, player_id=n % 5 + 1, points=10 * n
            )
    for n in range(4):
        RefusedResult.objects.create(
            board=boards[1],
            match_id=uuid.uuid4(),
            player_id=100 + n,
            code=RefusalCode.NOT_JOINED,
            kafka_partition=0,
            kafka_offset=n,
        )
    assert season_close(
        season_id=season.id, now=season.ends_at + timedelta(hours=1), force=True
    ).closed
    season_history_archive(season_id=season.id)
    Season.objects.filter(id=season.id).update(
        closed_at=timezone.now() - timedelta(days=closed_days_ago)
    )
    season.refresh_from_db()
    return season


@pytest.fixture
def seasons(board_redis, settings) -> dict[str, Season]:
    settings.MATCH_RESULTS_RETENTION_DAYS = 30
    settings.HISTORY_RETENTION_DAYS = 400
    old = _closed(offset=0, closed_days_ago=45)
    recent = _closed(offset=10, closed_days_ago=10)
    live = SeasonFactory.create(
        starts_at=timezone.now() - timedelta(days=1),
        ends_at=timezone.now() + timedelta(days=6),
        status=SeasonStatus.ACTIVE,
    )
    for n in range(5):
        MatchResultFactory.create(season=live, player_id=n + 1, points=n)
    return {"old": old, "recent": recent, "live": live}


def _counts(season: Season) -> tuple[int, int]:
    return (
        MatchResult.objects.filter(season=season).count(),
        RefusedResult.objects.filter(board__season=season).count(),
    )


@pytest.mark.django_db
def test_only_closed_seasons_past_the_retention_are_pruned_in_batches(seasons) -> None:
    old, recent, live = seasons["old"], seasons["recent"], seasons["live"]
    assert seasons_results_prune_due() == [old.id]
    kept_standings = FinalStanding.objects.filter(season=old).count()
    kept_history = HistoryEntry.objects.filter(season=old).count()
    assert kept_standings
    assert kept_history

    seen: list[tuple[int, int]] = []
    pruned = season_results_prune(
        season_id=old.id, batch=5, progress=lambda r, f: seen.append((r, f))
    )

    assert (pruned.results, pruned.refused) == (24, 4)
    # 24 results over two boards by 5 a batch, then the refused ones: totals as they grew.
    assert seen == [(5, 0), (10, 0), (12, 0), (17, 0), (22, 0), (24, 0), (24, 4)]
    assert _counts(old) == (0, 0)
    assert _counts(recent) == (24, 4)
    assert MatchResult.objects.filter(season=live).count() == 5
    old.refresh_from_db()
    assert old.results_pruned_at is not None
    # What players and staff read of the season stays.
    assert FinalStanding.objects.filter(season=old).count() == kept_standings
    assert HistoryEntry.objects.filter(season=old).count() == kept_history
    assert seasons_results_prune_due() == []
    # Its history is never archived again from results that are gone (a marker deleted by hand).
    HistoryArchive.objects.filter(season=old).delete()
    assert seasons_history_due() == []
    with pytest.raises(ValidationError, match="history can no longer be archived"):
        season_history_archive(season_id=old.id)
    assert HistoryEntry.objects.filter(season=old).count() == kept_history
    # close_season on it: closed already, the history's refusal said, not a traceback.
    out, err = StringIO(), StringIO()
    call_command("close_season", "--season", str(old.id), stdout=out, stderr=err)
    assert "history can no longer be archived" in err.getvalue()


@pytest.mark.django_db
def test_a_season_whose_history_is_owed_waits_for_its_archive(seasons, settings) -> None:
    old = seasons["old"]
    HistoryArchive.objects.filter(board__season=old, board__slug="cup").delete()
    assert seasons_results_prune_due() == []
    # Named by hand (the command's --season), it is refused too, and nothing goes: pruned first,
    # every player's history of the season would be lost.
    with pytest.raises(ValidationError, match=r"history is not archived yet \(boards cup\)"):
        season_results_prune(season_id=old.id)
    with pytest.raises(CommandError, match="history is not archived yet"):
        call_command("prune_match_results", "--season", str(old.id), "--dry-run")
    assert _counts(old) == (24, 4)
    # Unless it ended before the history's own retention: it will never be archived again.
    settings.HISTORY_RETENTION_DAYS = 1
    assert seasons_results_prune_due() == [old.id]
    assert season_results_prune(season_id=old.id).results == 24


@pytest.mark.django_db
def test_no_retention_keeps_every_result(seasons, settings) -> None:
    settings.MATCH_RESULTS_RETENTION_DAYS = 0
    assert seasons_results_prune_due() == []
    with pytest.raises(ValidationError, match="results are kept"):
        season_results_prune(season_id=seasons["old"].id)
    assert _counts(seasons["old"]) == (24, 4)
    season_standings_review(season_id=seasons["old"].id)


@pytest.mark.django_db
def test_seasons_within_their_retention_or_not_closed_are_refused(seasons) -> None:
    with pytest.raises(ValidationError, match="kept until MATCH_RESULTS_RETENTION_DAYS"):
        season_results_prune(season_id=seasons["recent"].id)
    with pytest.raises(ValidationError, match="active: its results are kept"):
        season_results_prune(season_id=seasons["live"].id)
    with pytest.raises(ValidationError, match="does not exist"):
        season_results_prune(season_id=987_654)
    assert _counts(seasons["recent"]) == (24, 4)


@pytest.mark.django_db
def test_corrections_cannot_rerank_a_season_past_the_retention(seasons) -> None:
    old, recent = seasons["old"], seasons["recent"]
    # Refused from the moment the window passed, before a single row went: a review never reads
    # a half-deleted season.
    with pytest.raises(ValidationError, match="its final standings and grants are final"):
        season_standings_review(season_id=old.id)
    with pytest.raises(ValidationError, match="match results are pruned"):
        season_standings_correct(season_id=old.id, fingerprint="anything")
    review = season_standings_review(season_id=recent.id)
    season_standings_correct(season_id=recent.id, fingerprint=review.fingerprint)


@pytest.mark.django_db
def test_the_command_prunes_what_is_due_with_progress(seasons) -> None:
    out = StringIO()
    call_command("prune_match_results", "--dry-run", stdout=out)
    assert f"seasons due: [{seasons['old'].id}]" in out.getvalue()
    assert _counts(seasons["old"]) == (24, 4)

    out = StringIO()
    call_command("prune_match_results", stdout=out)
    text = out.getvalue()
    assert f"season {seasons['old'].id}: 12 match results, 0 refused deleted" in text
    assert f"season {seasons['old'].id}: done, 24 match results and 4 refused" in text
    assert _counts(seasons["old"]) == (0, 0)
    assert _counts(seasons["recent"]) == (24, 4)

    with pytest.raises(CommandError, match="kept until"):
        call_command("prune_match_results", "--season", str(seasons["recent"].id))


@pytest.mark.django_db
def test_the_hourly_task_queues_a_prune_of_each_season_due(seasons, monkeypatch) -> None:
    from closeout import tasks

    queued: list[int] = []

    def run_now(*, season_id: int) -> None:
        queued.append(season_id)
        tasks.season_results_prune_task(season_id=season_id)

    monkeypatch.setattr(tasks.season_results_prune_task, "delay", run_now)
    assert tasks.match_results_prune_due_task() == [seasons["old"].id]
    assert queued == [seasons["old"].id]
    assert _counts(seasons["old"]) == (0, 0)
    assert tasks.match_results_prune_due_task() == []
