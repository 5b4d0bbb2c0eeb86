"""Moves of the migration tests: the database to a past state with its historical models, forward
to a target, and back to the latest migration whatever happens (the rest of the suite needs it)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

Targets = Sequence[tuple[str, str | None]]


def migrate_to(targets: Targets) -> MigrationExecutor:
    """The database migrated (forwards or backwards) to ``targets``; the executor that did it."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(list(targets))
    return executor


def migrate_to_latest() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    # Models that were dropped and created again have new content type ids.
    ContentType.objects.clear_cache()


@contextmanager
def historical_apps(targets: Targets) -> Iterator[Any]:
    """The database at ``targets`` and their historical models (an app targeted at None has
    none); at the latest migration again on the way out."""
    try:
        executor = migrate_to(targets)
        nodes = [(app, name) for app, name in targets if name is not None]
        yield executor.loader.project_state(nodes).apps
    finally:
        migrate_to_latest()
