"""A real Celery worker and beat keep the periodic work going across a broker (Redis) restart.

The broker is a private redis-server of this test (the configured one, REDIS_URL, serves other
checkouts' tests and is never restarted); the boards stay in the shared Redis under the
test's key prefix. The restart is a SIGKILL and a start on the same port, empty: what a
Redis without persistence comes back as, and the harshest case for the broker's state.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from leaderboard import keys
from seasons.models import Season, SeasonStatus
from tests.factories import SeasonFactory
from tests.helpers import (
    as_board,
    main_board_id,
    mark_intact,
    subprocess_database_url,
    wait_until,
)
from tests.leaderboard_project import celery_probe

ROOT = Path(__file__).resolve().parents[2]
CELERY = str(Path(sys.executable).with_name("celery"))
RESTARTS = 6
REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivateRedis:
    """A redis-server of the test's own on a free port, which the test may kill and restart."""

    def __init__(self, directory: Path) -> None:
        self.port = _free_port()
        self.directory = directory
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.starts += 1
        log = (self.directory / f"redis-{self.starts}.log").open("wb")
        # No persistence: it comes back empty, the broker's queues and bindings gone.
        options = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.process = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--dir", str(self.directory), *options],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        client = redis.Redis(port=self.port, socket_connect_timeout=0.5)
        wait_until(lambda: self._answers(client), timeout=10, every=0.05)

    @staticmethod
    def _answers(client: redis.Redis) -> bool:
        try:
            return bool(client.ping())
        except redis.ConnectionError:
            return False

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path)
    server.start()
    yield server
    server.kill()


@contextmanager
def _worker_and_beat(
    tmp_path: Path, broker_url: str
) -> Iterator[tuple[subprocess.Popen[bytes], subprocess.Popen[bytes]]]:
    env = os.environ | {
        "DATABASE_URL": subprocess_database_url(),
        "DATABASE_CONN_MAX_AGE": "0",
        "CELERY_BROKER_URL": broker_url,
        "CELERY_TASK_DEFAULT_QUEUE": f"test-{uuid.uuid4().hex[:12]}",
        "LEADERBOARD_KEY_PREFIX": settings.LEADERBOARD_KEY_PREFIX,
        "DJANGO_TEST_DATABASE_NAME": "",
    }
    started: list[subprocess.Popen[bytes]] = []
    # The worker as the Procfile runs it (heartbeat, gossip and mingle on), plus the probe task.
    for name, args in (
        ("worker", ["worker", "-l", "info", "--concurrency", "2"]),
        ("beat", ["beat", "-l", "info", "-s", str(tmp_path / "beat-schedule")]),
    ):
        if name == "worker":
            args += ["--include", celery_probe.__name__]
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
    try:
        yield started[0], started[1]
    finally:
        for process in started:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in started:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)


def _logs(tmp_path: Path) -> str:
    return "\n".join(
        f"--- {log.name}\n{log.read_text(errors='replace')[-6000:]}"
        for log in sorted(tmp_path.glob("*.log"))
    )


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_periodic_work_goes_on_after_the_broker_restarts_under_a_busy_worker(
    tmp_path, private_redis, board_redis
) -> None:
    now = timezone.now()
    live = SeasonFactory.create(starts_at=now - timedelta(days=1), ends_at=now + timedelta(days=1))
    Season.objects.filter(id=live.id).update(status=SeasonStatus.ACTIVE)
    codec = as_board(live).codec
    live_board = keys.board(board_id=main_board_id(live.id))
    board_redis.zadd(live_board, {"7": codec.encode(points=70, elapsed_ticks=5)})
    # Written by hand as the truth (no recovery task runs here): intact, or no snapshot is made.
    mark_intact(live)
    every_second, _ = IntervalSchedule.objects.get_or_create(
        every=1, period=IntervalSchedule.SECONDS
    )
    every_two_seconds, _ = IntervalSchedule.objects.get_or_create(
        every=2, period=IntervalSchedule.SECONDS
    )
    # The product's one-second task, and the probe that is mid-run most of the time: a run
    # every 2 s that lasts 2 s keeps one of the two pool processes busy, the other free for
    # the snapshots (a faster schedule would queue probes ahead of them).
    PeriodicTask.objects.create(
        name="top snapshots", task="leaderboard.tasks.refresh_top_snapshots", interval=every_second
    )
    PeriodicTask.objects.create(
        name="probe", task="tests.probe.slow_tick", interval=every_two_seconds
    )

    snapshot_key = keys.top_snapshot(board_id=main_board_id(live.id))

    def snapshot_entries() -> list[list[int]] | None:
        raw = board_redis.get(snapshot_key)
        # Rank, player, points (each entry also carries the name and country, here unknown).
        return None if raw is None else [e[:3] for e in json.loads(raw)["entries"]]

    def count(key: str) -> int:
        return int(board_redis.get(key) or 0)

    def context() -> str:
        return _logs(tmp_path)

    with _worker_and_beat(tmp_path, private_redis.url) as (worker, _beat):
        wait_until(
            lambda: snapshot_entries() == [[1, 7, 70]], timeout=90, every=0.2, context=context
        )
        # Which of the worker's broker sockets notices the loss first decides whether kombu
        # fails (about one restart in three without the fix): several restarts make the
        # crash all but certain without it.
        for _ in range(RESTARTS):
            # A probe run in flight: it ends, and acks, after its broker connection is gone.
            wait_until(
                lambda: count(celery_probe.started_key()) > count(celery_probe.finished_key()),
                timeout=60,
                every=0.05,
                context=context,
            )
            finished_before = count(celery_probe.finished_key())
            private_redis.kill()
            # The broker stays away until that run has ended: the worker meets the loss with a
            # message unacked, and the late ack comes after its connection is gone.
            wait_until(
                lambda: count(celery_probe.finished_key()) > finished_before,  # noqa: B023
                timeout=30,
                every=0.05,
                context=context,
            )
            private_redis.start()
            # The periodic work goes on: a run queued after the restart ends too.
            finished_at_restart = count(celery_probe.finished_key())
            wait_until(
                lambda: count(celery_probe.finished_key()) > finished_at_restart + 1,  # noqa: B023
                timeout=90,
                every=0.1,
                context=context,
            )
            assert worker.poll() is None, context()

        # ... and the top list follows a board change made after the restarts.
        board_redis.zadd(live_board, {"8": codec.encode(points=80, elapsed_ticks=9)})
        wait_until(
            lambda: snapshot_entries() == [[1, 8, 80], [2, 7, 70]],
            timeout=60,
            every=0.2,
            context=context,
        )
        assert worker.poll() is None, context()
