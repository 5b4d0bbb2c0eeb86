from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from leaderboard_project.schedules import PERIODIC_TASKS


def setup(*args: str) -> str:
    out = StringIO()
    call_command("setup_periodic_tasks", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_setup_periodic_tasks_is_idempotent_and_keeps_staff_changes() -> None:
    assert f"{len(PERIODIC_TASKS)} created, 0 updated" in setup()
    for spec in PERIODIC_TASKS:
        row = PeriodicTask.objects.get(name=spec.name)
        assert (row.task, row.interval.every, row.interval.period, row.enabled) == (
            spec.task,
            spec.every_seconds,
            "seconds",
            True,
        )
    assert f"0 created, 0 updated, {len(PERIODIC_TASKS)} unchanged" in setup()
    assert PeriodicTask.objects.filter(name__in=[s.name for s in PERIODIC_TASKS]).count() == len(
        PERIODIC_TASKS
    )

    # Staff slow one task down and disable it: a rerun keeps that, --reset puts it back.
    spec = PERIODIC_TASKS[0]
    row = PeriodicTask.objects.get(name=spec.name)
    row.interval = IntervalSchedule.objects.create(every=7200, period=IntervalSchedule.SECONDS)
    row.enabled = False
    row.save()
    setup()
    row.refresh_from_db()
    assert (row.interval.every, row.enabled) == (7200, False)
    assert "1 updated" in setup("--reset")
    row.refresh_from_db()
    assert (row.interval.every, row.enabled) == (spec.every_seconds, True)


def test_every_registered_task_exists() -> None:
    from leaderboard_project.celery import app

    app.loader.import_default_modules()
    for spec in PERIODIC_TASKS:
        assert spec.task in app.tasks, spec.task
