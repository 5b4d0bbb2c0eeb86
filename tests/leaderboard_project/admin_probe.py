"""Run in a fresh process by test_admin.py: set Django up and print what the admin site holds.

``python -m tests.leaderboard_project.admin_probe [APP ...]``: with app names, the project's
apps are put in INSTALLED_APPS in that order, at the end. Every ``register`` and
``unregister`` call made while the admin modules are imported is recorded, then printed as
JSON with a description of each registered ModelAdmin.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

PROJECT_APPS = ("seasons", "leaderboard", "ingestion", "closeout", "leaderboard_project")


def _labels(model_or_iterable: Any) -> list[str]:
    from django.db.models.base import ModelBase

    models: list[Any] = (
        [model_or_iterable] if isinstance(model_or_iterable, ModelBase) else [*model_or_iterable]
    )
    return [model._meta.label for model in models]


def _name(obj: Any) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def main(order: list[str]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaderboard_project.settings_test")
    from django.conf import settings
    from django.contrib.admin.sites import AdminSite

    if order:
        assert sorted(order) == sorted(PROJECT_APPS), order
        others = [app for app in settings.INSTALLED_APPS if app not in PROJECT_APPS]
        settings.INSTALLED_APPS = [*others, *order]

    calls: list[dict[str, Any]] = []
    original_register, original_unregister = AdminSite.register, AdminSite.unregister

    def recording_register(
        self: AdminSite, model_or_iterable: Any, admin_class: Any = None, **options: Any
    ) -> None:
        admin_name = _name(admin_class) if admin_class is not None else "default ModelAdmin"
        for label in _labels(model_or_iterable):
            calls.append({"call": "register", "model": label, "admin": admin_name})
        original_register(self, model_or_iterable, admin_class, **options)

    def recording_unregister(self: AdminSite, model_or_iterable: Any) -> None:
        for label in _labels(model_or_iterable):
            calls.append({"call": "unregister", "model": label})
        original_unregister(self, model_or_iterable)

    AdminSite.register = recording_register  # type: ignore[method-assign]
    AdminSite.unregister = recording_unregister  # type: ignore[method-assign]

    import django

    django.setup()  # the admin app's ready() imports every app's admin module
    from django.contrib import admin

    registry = {}
    for model, model_admin in admin.site._registry.items():
        cls = type(model_admin)
        registry[model._meta.label] = {
            "admin": _name(cls),
            "bases": [_name(base) for base in cls.__mro__],
            "inlines": [_name(inline) for inline in model_admin.inlines],
            "actions": [getattr(a, "__name__", a) for a in model_admin.actions or ()],
            "live_fields": list(getattr(model_admin, "_live_fields", ())),
        }
    json.dump(
        {"installed_apps": list(settings.INSTALLED_APPS), "calls": calls, "registry": registry},
        sys.stdout,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
