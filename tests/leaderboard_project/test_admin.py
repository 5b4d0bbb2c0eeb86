"""The admin site is built once: one admin per model, registered by the module that owns it,
never replaced at import time, and the Season admin (assembled in leaderboard_project.admin
from every app's pieces) the same whatever the order of INSTALLED_APPS."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.leaderboard_project import admin_probe

ROOT = Path(__file__).resolve().parents[2]

# The one module that registers each of the project's models' admin: its app's, but for the
# Season (assembled from every app's pieces) and the Schedule (created through the close-out's
# service, which copies boards and reward tiers).
DESIGNATED = {
    "seasons.Season": "leaderboard_project.admin",
    "seasons.Schedule": "closeout.admin",
}

SEASON_ADMIN = {
    "admin": "leaderboard_project.admin.SeasonAdmin",
    "inlines": ["leaderboard.admin.BoardInline", "closeout.admin.RewardTierInline"],
    "actions": [
        "close_season",
        "make_active",
        "make_closing",
        "rebuild_board",
        "reconcile_boards",
        "review_final_standings",
    ],
    "live_fields": ["live_boards"],
}


@cache
def _probe(order: tuple[str, ...] = ()) -> dict[str, Any]:
    """What a fresh process's admin site holds, with the project's apps in ``order``."""
    done = subprocess.run(
        [sys.executable, "-m", admin_probe.__name__, *order],
        cwd=ROOT,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _season_admin(probe: dict[str, Any]) -> dict[str, Any]:
    described = probe["registry"]["seasons.Season"]
    return {key: described[key] for key in SEASON_ADMIN}


def test_each_model_is_registered_once_by_the_module_that_owns_it() -> None:
    probe = _probe()
    calls = probe["calls"]
    assert [c for c in calls if c["call"] != "register"] == []
    registrations = Counter(c["model"] for c in calls)
    assert {model for model, count in registrations.items() if count > 1} == set()
    # Nothing registered outside the import of the admin modules either.
    assert set(registrations) == set(probe["registry"])

    misplaced = {}
    for label, described in probe["registry"].items():
        app = label.split(".")[0]
        if app not in admin_probe.PROJECT_APPS:
            continue
        expected = DESIGNATED.get(label, f"{app}.admin")
        if described["admin"].rsplit(".", 1)[0] != expected:
            misplaced[label] = described["admin"]
    assert misplaced == {}
    assert _season_admin(probe) == SEASON_ADMIN


def test_no_code_unregisters_an_admin() -> None:
    call = re.compile(r"\bunregister\s*\(")
    found = []
    for directory, subdirs, files in os.walk(ROOT):
        subdirs[:] = [d for d in subdirs if not d.startswith(".") and d != "__pycache__"]
        for name in files:
            if name.endswith(".py"):
                path = Path(directory, name)
                if call.search(path.read_text(encoding="utf-8")):
                    found.append(str(path.relative_to(ROOT)))
    assert found == []


@pytest.mark.parametrize(
    "order",
    [
        ("leaderboard_project", "closeout", "ingestion", "leaderboard", "seasons"),
        ("closeout", "seasons", "leaderboard_project", "leaderboard", "ingestion"),
    ],
)
def test_the_admin_is_the_same_whatever_the_app_order(order: tuple[str, ...]) -> None:
    reordered = _probe(order)
    assert reordered["installed_apps"][-len(order) :] == list(order)  # the order took effect
    assert _season_admin(reordered) == SEASON_ADMIN
    assert reordered["registry"] == _probe()["registry"]
    assert [c for c in reordered["calls"] if c["call"] != "register"] == []
