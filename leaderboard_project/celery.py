"""The Celery application (Celery's Django example, configured from Django settings)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaderboard_project.settings")

app = Celery("leaderboard_project")
# Every CELERY_* Django setting configures Celery; settings.py is the only reader of the env.
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
