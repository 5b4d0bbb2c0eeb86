"""A real Celery worker and beat (DatabaseScheduler) close a season out on schedule, and create
the seasons of a schedule."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from closeout.models import FinalStanding, HistoryEntry, RewardGrant
from closeout.services import reward_tier_create, schedule_create
from leaderboard import keys
from leaderboard.services import board_mark_intact
from leaderboard_project.schedules import PERIODIC_TASKS
from seasons.models import Season, SeasonStatus
from tests.factories import MatchResultFactory, SeasonFactory
from tests.helpers import (
    as_board,
    main_board_id,
    redis_url,
    subprocess_database_url,
    wait_until,
)

ROOT = Path(__file__).resolve().parents[2]
CELERY = str(Path(sys.executable).with_name("celery"))
# A broker database of its own on the configured Redis, and a queue name of its own per run:
# leftovers of another run are never consumed here, and nothing here is flushed.
BROKER_DB = 14


@pytest.fixture
def celery_processes(
    tmp_path: Path, drained_match_results: str
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Start worker and beat (after the test set its data up), stop them at the end."""
    env = os.environ | {
        "DATABASE_URL": subprocess_database_url(),
        "DATABASE_CONN_MAX_AGE": "0",
        "CELERY_BROKER_URL": redis_url(db=BROKER_DB),
        "CELERY_TASK_DEFAULT_QUEUE": f"test-{uuid.uuid4().hex[:12]}",
        "LEADERBOARD_KEY_PREFIX": settings.LEADERBOARD_KEY_PREFIX,
        "SEASON_CLOSE_GRACE_SECONDS": "1",
        # The close-out waits for this (empty) topic to drain, not for the shared one.
        "KAFKA_MATCH_RESULTS_TOPIC": drained_match_results,
        "KAFKA_CONSUMER_GROUP": settings.KAFKA_CONSUMER_GROUP,
        "DJANGO_TEST_DATABASE_NAME": "",
    }
    started: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        for name, args in (
            ("worker", ["worker", "-l", "info", "--concurrency", "1", "--without-heartbeat"]),
            ("beat", ["beat", "-l", "info", "-s", str(tmp_path / "beat-schedule")]),
        ):
            log = (tmp_path / f"{name}.log").open("wb")
            started.append(
                subprocess.Popen(
                    [CELERY, "-A", "leaderboard_project", *args],
                    cwd=ROOT,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group: the pool children go too
                )
            )

    yield start  # type: ignore[misc]
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    for process in started:
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)
    for log in sorted(tmp_path.glob("*.log")):
        sys.stdout.write(f"--- {log.name}\n{log.read_text(errors='replace')[-4000:]}\n")


@pytest.mark.django_db(transaction=True)
def test_beat_and_worker_refresh_top_lists_and_close_an_ended_season(
    celery_processes, board_redis, tmp_path
) -> None:
    now = timezone.now()
    season = SeasonFactory.create(
        starts_at=now - timedelta(days=1), ends_at=now + timedelta(seconds=2)
    )
    Season.objects.filter(id=season.id).update(status=SeasonStatus.ACTIVE)
    for player, points in [(1, 10), (2, 30), (3, 20)]:
        MatchResultFactory.create(
            season=season, player_id=player, points=points, achieved_at=now - timedelta(hours=1)
        )
    reward_tier_create(season_id=season.id, rank_from=1, rank_to=2, reward_name="gems")
    board = keys.board(board_id=main_board_id(season.id))
    board_redis.zadd(board, {"1": 1.0, "2": 2.0})
    # A season that stays live: its top list must be refreshed every second.
    live = SeasonFactory.create(starts_at=now - timedelta(days=1), ends_at=now + timedelta(days=1))
    Season.objects.filter(id=live.id).update(status=SeasonStatus.ACTIVE)
    codec = as_board(live).codec
    live_board = keys.board(board_id=main_board_id(live.id))
    board_redis.zadd(live_board, {"7": codec.encode(points=70, elapsed_ticks=5)})

    # Every registered task, ticking every second for the test.
    call_command("setup_periodic_tasks", verbosity=0)
    every_second, _ = IntervalSchedule.objects.get_or_create(
        every=1, period=IntervalSchedule.SECONDS
    )
    PeriodicTask.objects.update(interval=every_second, expire_seconds=None)
    # The boards above are written straight to Redis, not from stored results: the reconcile
    # and the recovery would rightly rebuild them from PostgreSQL, so they sit this test out
    # (and the board is marked intact by hand, as a recovery would).
    PeriodicTask.objects.filter(
        task__in=[
            "leaderboard.tasks.boards_reconcile_task",
            "leaderboard.tasks.boards_recover_task",
        ]
    ).update(enabled=False)
    board_mark_intact(board_id=main_board_id(live.id))
    # A competition every minute, from the live season's boards: beat creates its seasons.
    schedule = schedule_create(
        slug="every-minute",
        name="Minute cup",
        cron="* * * * *",
        template_season_id=live.id,
        lead_minutes=1,
        starts_from=now - timedelta(seconds=90),
    )

    celery_processes()

    snapshot_key = keys.top_snapshot(board_id=main_board_id(live.id))

    def snapshot_entries() -> list[list[int]] | None:
        raw = board_redis.get(snapshot_key)
        # Rank, player, points (each entry also carries the name and country, here unknown).
        return None if raw is None else [e[:3] for e in json.loads(raw)["entries"]]

    wait_until(lambda: snapshot_entries() == [[1, 7, 70]], timeout=60, every=0.2)
    wait_until(lambda: Season.objects.filter(schedule=schedule).exists(), timeout=60, every=0.2)
    cup = Season.objects.filter(schedule=schedule).order_by("occurrence").first()
    assert cup is not None
    assert cup.boards.get().slug == "main"
    # ... and again after the board moved: it is refreshed on schedule, not once.
    board_redis.zadd(live_board, {"8": codec.encode(points=80, elapsed_ticks=9)})
    wait_until(lambda: snapshot_entries() == [[1, 8, 80], [2, 7, 70]], timeout=30, every=0.2)

    # Beat's status sync flips it to closing at its end, then the close-out sweep queues the
    # close-out, which the worker runs once the drain grace is over.
    wait_until(
        lambda: Season.objects.get(id=season.id).closing_since is not None, timeout=60, every=0.2
    )
    closing_since = Season.objects.get(id=season.id).closing_since
    assert closing_since is not None
    assert closing_since >= season.ends_at
    wait_until(
        lambda: Season.objects.get(id=season.id).status == SeasonStatus.CLOSED,
        timeout=60,
        every=0.2,
    )
    assert [
        (s.rank, s.player_id, s.points) for s in FinalStanding.objects.filter(season=season)
    ] == [(1, 2, 30), (2, 3, 20), (3, 1, 10)]
    assert sorted(RewardGrant.objects.filter(season=season).values_list("player_id", "rank")) == [
        (2, 1),
        (3, 2),
    ]
    closed = Season.objects.get(id=season.id)
    assert closed.closed_at is not None
    assert closed.closed_at >= closing_since + timedelta(seconds=1)  # the drain grace
    # Then every player's history, queued by the close-out task.
    wait_until(
        lambda: HistoryEntry.objects.filter(season=season).count() == 3, timeout=60, every=0.2
    )
    assert sorted(HistoryEntry.objects.filter(season=season).values_list("player_id", "rank")) == [
        (1, 3),
        (2, 1),
        (3, 2),
    ]
    # The close-out unlinks the board's keys right after it commits the status: poll for it.
    wait_until(lambda: board_redis.exists(board) == 0, timeout=30, every=0.2)

    # The periodic tasks ran every second, yet neither beat nor the worker logged a routine line
    # about them; the close-out they queued is no routine and was logged.
    logs = (tmp_path / "worker.log").read_text() + (tmp_path / "beat.log").read_text()
    routine = [
        line
        for line in logs.splitlines()
        if any(spec.task in line for spec in PERIODIC_TASKS) and " INFO " in line
    ]
    assert routine == []
    assert "Task closeout.tasks.season_close_task[" in logs
