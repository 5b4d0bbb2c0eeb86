"""The Celery application (Celery's Django example, configured from Django settings)."""

import logging.config
import os
from typing import Any

from celery import Celery
from celery.signals import setup_logging

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
