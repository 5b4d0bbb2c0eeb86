"""A real Prometheus scrapes a gunicorn server (two workers, multiprocess mode) and a consumer
process; the figures are read back through Prometheus' HTTP query API."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings

from leaderboard.models import ScoringRule
from seasons.models import SeasonStatus
from tests.helpers import make_season, subprocess_database_url, wait_until
from tests.ingestion.ingest_helpers import MANAGE, Result, publish_results

from .prom import REPO, PrometheusServer, ensure_prometheus, free_port

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


class _Processes:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.started: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self, name: str, args: list[str], env: dict[str, str]) -> None:
        with (self.workdir / f"{name}.log").open("ab") as out:
            proc = subprocess.Popen(args, env=env, cwd=REPO, stdout=out, stderr=out)
        self.started.append((name, proc))

    def logs(self) -> str:
        parts = []
        for name, _ in self.started:
            lines = (self.workdir / f"{name}.log").read_text(errors="replace").splitlines()
            parts.append(f"--- {name} (tail) ---\n" + "\n".join(lines[-20:]))
        return "\n".join(parts)

    def stop(self) -> None:
        for _, proc in self.started:
            if proc.poll() is None:
                proc.terminate()
        for _, proc in self.started:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


@pytest.fixture
def processes(tmp_path) -> Iterator[_Processes]:
    started = _Processes(tmp_path)
    yield started
    started.stop()


def _answers(port: int, path: str) -> bool:
    # A generous timeout: a request the client gave up on is still answered, and counted, by
    # the server (a health check waits on slow dependencies on a loaded machine).
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _wait_for_value(
    prometheus: PrometheusServer, expr: str, expected: float, *, context: Callable[[], str]
) -> None:
    """Poll the query API until ``expr`` evaluates to ``expected`` (bounded)."""
    wait_until(
        lambda: prometheus.value(expr) == expected,
        timeout=90,
        every=0.5,
        context=lambda: f"{expr} = {prometheus.value(expr)}\n{context()}",
    )


def test_prometheus_scrapes_web_workers_and_a_consumer(tmp_path, processes, topic_and_dlq) -> None:
    ensure_prometheus()
    topic, dlq = topic_and_dlq("ingest", partitions=2)
    season = make_season(rule=ScoringRule.BEST, status=SeasonStatus.ACTIVE)
    env = {
        **os.environ,
        "DATABASE_URL": subprocess_database_url(),
        "LEADERBOARD_KEY_PREFIX": settings.LEADERBOARD_KEY_PREFIX,
        "INGEST_BACKOFF_MAX_SECONDS": "1",
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    web_port, consumer_port = free_port(), free_port()
    processes.start(
        "web",
        [
            sys.executable,
            "-m",
            "gunicorn",
            "-c",
            "python:leaderboard_project.gunicorn_conf",
            "leaderboard_project.wsgi:application",
            "--bind",
            f"127.0.0.1:{web_port}",
            "--workers",
            "2",
        ],
        {**env, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "web-multiproc")},
    )
    processes.start(
        "consumer",
        [
            sys.executable,
            str(MANAGE),
            "consume_match_results",
            "--topic",
            topic,
            "--dead-letter-topic",
            dlq,
            "--group",
            f"test-{uuid.uuid4().hex[:12]}",
            "--stats-interval",
            "1",
            "--metrics-port",
            str(consumer_port),
        ],
        env,
    )
    prometheus = PrometheusServer(
        workdir=tmp_path,
        scrape_configs=[
            {
                "job_name": "leaderboard-web",
                "static_configs": [{"targets": [f"127.0.0.1:{web_port}"]}],
            },
            {
                "job_name": "leaderboard-consumer",
                "static_configs": [{"targets": [f"127.0.0.1:{consumer_port}"]}],
            },
        ],
    )
    prometheus.start()
    try:
        context = lambda: processes.logs() + "\n" + prometheus.log_tail()  # noqa: E731
        wait_until(
            lambda: _answers(web_port, "/healthz"),
            timeout=60,
            every=0.2,
            context=context,
        )
        # Requests spread over both workers; /metrics must count them all, whichever worker
        # answers the scrape. Counted under status 200: these (a loaded machine may answer one
        # 503 when a dependency check is slow) and the one the wait above ended on.
        answered_ok = 1 + sum(_answers(web_port, "/healthz") for _ in range(20))
        when = season.starts_at + timedelta(days=1)
        results = [Result(uuid.uuid4(), 100 + n, season.id, 10 * n, when) for n in range(30)]
        publish_results(topic, results)

        checks = {
            'sum(leaderboard_http_requests_total{view="healthz",status="200"})': answered_ok,
            f'sum(leaderboard_ingest_results_applied_total{{topic="{topic}"}})': 30,
            f'sum(leaderboard_ingest_lag{{topic="{topic}"}})': 0,
            f'leaderboard_board_size{{season="{season.id}",board="main"}}': 30,
            'up{job="leaderboard-consumer"}': 1,
        }
        for expr, expected in checks.items():
            _wait_for_value(prometheus, expr, expected, context=context)
        # Every worker's request histogram is summed too (one series per label set, no "pid").
        series = prometheus.query('leaderboard_http_request_duration_seconds_count{view="healthz"}')
        assert len(series) == 1, series
        assert "pid" not in series[0]["metric"]
    finally:
        prometheus.stop()
