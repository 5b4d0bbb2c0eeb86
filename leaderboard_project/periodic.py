"""Writes django-celery-beat's schedule from the registry in ``schedules.py``."""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.db import transaction
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from .schedules import PERIODIC_TASKS, PeriodicTaskSpec


@dataclass(frozen=True)
class PeriodicTasksSyncResult:
    created: tuple[str, ...]
    updated: tuple[str, ...]
    unchanged: tuple[str, ...]


@transaction.atomic
def periodic_tasks_sync(
    *, specs: tuple[PeriodicTaskSpec, ...] = PERIODIC_TASKS, reset: bool = False
) -> PeriodicTasksSyncResult:
    """Create each registered periodic task, or bring an existing one in line with the registry.

    Staff may change a task's interval or switch it off in the admin; that choice survives a
    rerun (every ``make run``) unless ``reset`` is set. The task path and arguments always follow
    the registry, since code that moved would otherwise be called under a stale name.
    """
    created: list[str] = []
    updated: list[str] = []
    unchanged: list[str] = []
    for spec in specs:
        interval, _ = IntervalSchedule.objects.get_or_create(
            every=spec.every_seconds, period=IntervalSchedule.SECONDS
        )
        wanted = {
            "task": spec.task,
            "kwargs": json.dumps(spec.kwargs, sort_keys=True),
            "description": spec.description,
            "expire_seconds": spec.expires_seconds,
        }
        row = PeriodicTask.objects.select_for_update().filter(name=spec.name).first()
        if row is None:
            PeriodicTask.objects.create(name=spec.name, interval=interval, enabled=True, **wanted)
            created.append(spec.name)
            continue
        if reset:
            wanted.update({"interval": interval, "enabled": True, "crontab": None})
        changed = [name for name, value in wanted.items() if getattr(row, name) != value]
        if changed:
            for name in changed:
                setattr(row, name, wanted[name])
            row.save()
            updated.append(spec.name)
        else:
            unchanged.append(spec.name)
    return PeriodicTasksSyncResult(
        created=tuple(created), updated=tuple(updated), unchanged=tuple(unchanged)
    )
