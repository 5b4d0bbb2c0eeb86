"""The Celery application (Celery's Django example, configured from Django settings)."""

import logging.config
import os
from typing import Any

from celery import Celery
from celery.signals import beat_init, setup_logging

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


@beat_init.connect
def _reconcile_at_start(sender: Any = None, **kwargs: Any) -> None:
    """Queue the reconcile once when beat starts (unless staff switched it off): its schedule
    would first run it an interval (an hour) later, and a restart of everything is when Redis
    most likely lost its last writes."""
    from django_celery_beat.models import PeriodicTask

    from .schedules import RECONCILE_TASK_NAME

    row = PeriodicTask.objects.filter(name=RECONCILE_TASK_NAME, enabled=True).first()
    if row is not None:
        app.send_task(row.task, queue=row.queue or None)
