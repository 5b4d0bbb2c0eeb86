"""The Celery application (Celery's Django example, configured from Django settings)."""

import logging.config
import os
from typing import Any

from celery import Celery
from celery.signals import (
    setup_logging,
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_shutdown,
)

from . import task_metrics

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaderboard_project.settings")

app = Celery("leaderboard_project")
# Every CELERY_* Django setting configures Celery; settings.py is the only reader of the env.
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@setup_logging.connect
def _logging_from_django_settings(**kwargs: Any) -> None:
    """Worker and beat log through settings.LOGGING (LOG_FORMAT, LOG_LEVEL, the filters)
    instead of Celery's own root handler; a receiver here makes Celery leave logging alone."""
    from django.conf import settings

    logging.config.dictConfig(settings.LOGGING)


@task_prerun.connect
def _task_prerun(task_id: str | None = None, **kwargs: Any) -> None:
    if task_id is not None:
        task_metrics.task_started(task_id=task_id)


@task_postrun.connect
def _task_postrun(
    task_id: str | None = None, task: Any = None, state: str | None = None, **kwargs: Any
) -> None:
    if task_id is not None:
        task_metrics.task_finished(
            task_id=task_id, task_name=getattr(task, "name", "unknown"), state=state
        )


@worker_init.connect
def _worker_metrics(**kwargs: Any) -> None:
    task_metrics.worker_metrics_start()


@worker_process_shutdown.connect
def _pool_process_exited(**kwargs: Any) -> None:
    task_metrics.pool_process_exited()
