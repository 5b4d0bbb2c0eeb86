"""A late-acked task is never handed to a second worker while the first still has it: the
broker's visibility timeout outlasts the longest wait and run a task can have."""

from __future__ import annotations

from django.conf import settings

from leaderboard_project.celery import app


def test_the_visibility_timeout_outlasts_a_queued_retried_and_running_task() -> None:
    app.loader.import_default_modules()
    ours = {
        name: task
        for name, task in app.tasks.items()
        if name.split(".")[0] in {"leaderboard", "closeout", "seasons", "webhooks", "ingestion"}
    }
    assert len(ours) > 5
    longest = max(task.time_limit or 0 for task in ours.values())
    # Celery's own default cap of a retry's backoff (600 s) where a task sets none.
    longest_backoff = max(
        getattr(task, "retry_backoff_max", 600)
        for task in ours.values()
        if getattr(task, "autoretry_for", ()) and getattr(task, "retry_backoff", False)
    )
    timeout = settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]
    # Prefetched behind another task of the longest kind, after the longest countdown, then
    # running for as long as it may.
    assert timeout > 2 * longest + longest_backoff
