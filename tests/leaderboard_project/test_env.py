"""The strict environment reader settings.py uses (leaderboard_project/env.py)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from leaderboard_project.env import StrictEnv


@pytest.fixture
def env() -> StrictEnv:
    return StrictEnv()


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("1", True), ("true", True), (" Yes ", True), ("on", True), ("0", False), ("OFF", False)],
)
def test_booleans(env, monkeypatch, raw, expected) -> None:
    monkeypatch.setenv("LB_TEST_FLAG", raw)
    assert env.bool("LB_TEST_FLAG", default=not expected) is expected


@pytest.mark.parametrize(
    ("method", "raw", "kind"),
    [("bool", "ture", "boolean"), ("int", "2OO", "integer"), ("float", "1x5", "number")],
)
def test_a_bad_value_names_its_variable(env, monkeypatch, method, raw, kind) -> None:
    monkeypatch.setenv("LB_TEST_VALUE", raw)
    with pytest.raises(ImproperlyConfigured, match=rf"LB_TEST_VALUE='{raw}' is not a valid {kind}"):
        getattr(env, method)("LB_TEST_VALUE", default=None)


def test_empty_means_unset(env, monkeypatch) -> None:
    monkeypatch.setenv("LB_TEST_VALUE", "")
    assert env.int("LB_TEST_VALUE", default=7) == 7
    assert env.bool("LB_TEST_VALUE", default=True) is True
    assert env.str("LB_TEST_VALUE", default="fallback") == "fallback"
    assert env.list("LB_TEST_VALUE", default="a,b") == ["a", "b"]
    monkeypatch.delenv("LB_TEST_VALUE")
    assert env.float("LB_TEST_VALUE", default=2.5) == 2.5


def test_values_and_lists(env, monkeypatch) -> None:
    monkeypatch.setenv("LB_TEST_VALUE", "1.25")
    assert env.float("LB_TEST_VALUE", default=0.0) == 1.25
    monkeypatch.setenv("LB_TEST_VALUE", " a.example, b.example ,,")
    assert env.list("LB_TEST_VALUE", default="") == ["a.example", "b.example"]


def test_database_url_is_parsed_for_django(settings) -> None:
    db = StrictEnv.db_url_config("postgres://u:p%40ss@db.internal:6543/lb")
    assert (db["ENGINE"], db["HOST"], db["PORT"], db["NAME"], db["USER"], db["PASSWORD"]) == (
        "django.db.backends.postgresql",
        "db.internal",
        6543,
        "lb",
        "u",
        "p@ss",
    )
    assert settings.DATABASES["default"]["CONN_HEALTH_CHECKS"] is True
