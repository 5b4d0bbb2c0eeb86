"""Gunicorn hooks for Prometheus' multiprocess mode.

Used as ``gunicorn -c python:leaderboard_project.gunicorn_conf`` (the Procfile).

With ``PROMETHEUS_MULTIPROC_DIR`` set, each worker keeps its metrics in files there and /metrics
sums them (leaderboard_project/metrics.py). The folder is emptied when the server starts (the
files of a previous run would be summed in) and a dead worker's gauge files are dropped; its
counters stay, so a total never goes down when a worker is recycled.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaderboard_project.settings")


def _multiproc_dir() -> str:
    from django.conf import settings

    return str(settings.PROMETHEUS_MULTIPROC_DIR)


def on_starting(server: Any) -> None:
    path = _multiproc_dir()
    if path:
        if Path(path).exists():
            shutil.rmtree(path)
        Path(path).mkdir(parents=True)


def child_exit(server: Any, worker: Any) -> None:
    path = _multiproc_dir()
    if path:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid, path=path)
