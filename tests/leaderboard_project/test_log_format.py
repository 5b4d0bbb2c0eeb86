"""LOG_FORMAT=json: every line a process writes to its log is one JSON object."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

DJANGO_PROCESS = """
import logging
import django

django.setup()
log = logging.getLogger("ingestion.consumer")
log.info("applied %s results", 5000, extra={"partition": 3})
try:
    1 / 0
except ZeroDivisionError:
    log.exception("batch failed")
"""

# What `celery -A leaderboard_project worker|beat` does with logging before its first line.
CELERY_PROCESS = """
import logging
from leaderboard_project.celery import app

app.log.setup(loglevel="INFO")
due = logging.getLogger("celery.beat").info
due("Scheduler: Sending due task %s (%s)", "snap", "leaderboard.tasks.refresh_top_snapshots")
due("Scheduler: Sending due task %s (%s)", "close-out", "seasons.tasks.seasons_close_due_task")
"""


def _run(code: str, **env: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=os.environ | env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return (done.stdout + done.stderr).splitlines()


def test_a_django_process_logs_one_json_object_per_line() -> None:
    lines = _run(DJANGO_PROCESS, LOG_FORMAT="json")
    records = [json.loads(line) for line in lines]  # every line parses on its own
    applied, failed = (r for r in records if r["logger"] == "ingestion.consumer")
    assert applied["message"] == "applied 5000 results"
    assert applied["level"] == "INFO"
    assert applied["logger"] == "ingestion.consumer"
    assert applied["partition"] == 3
    assert datetime.fromisoformat(applied["timestamp"]).utcoffset() == timedelta(0)
    assert failed["level"] == "ERROR"
    assert "ZeroDivisionError: division by zero" in failed["exc_info"]
    assert "Traceback" in failed["exc_info"]


def test_text_stays_the_default() -> None:
    lines = _run(DJANGO_PROCESS)
    assert any(line.endswith(" INFO ingestion.consumer applied 5000 results") for line in lines)
    assert any(line.startswith("Traceback") for line in lines)


def test_celery_logs_through_the_settings_json_and_quiet() -> None:
    lines = _run(CELERY_PROCESS, LOG_FORMAT="json")
    records = [json.loads(line) for line in lines]
    assert [r["message"] for r in records if r["logger"] == "celery.beat"] == [
        "Scheduler: Sending due task close-out (seasons.tasks.seasons_close_due_task)"
    ]
