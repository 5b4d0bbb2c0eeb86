"""The shipped alert rules are valid, and each fires when it should (promtool's rule tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .prom import ALERTS, ensure_prometheus, promtool


@pytest.fixture(scope="module", autouse=True)
def _prometheus_installed() -> None:
    ensure_prometheus()


def test_promtool_accepts_the_alert_rules() -> None:
    checked = promtool("check", "rules", str(ALERTS))
    assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()
    assert b"SUCCESS: 11 rules found" in checked.stdout


def test_each_alert_fires_on_its_case_and_not_on_healthy_series() -> None:
    # alerts_test.yml: lag growing, dead letters, a consumer down, no consumer, snapshot stale,
    # a webhook endpoint lagging, webhook events given up, no webhook deliverer.
    cases = Path(__file__).parent / "alerts_test.yml"
    tested = promtool("test", "rules", str(cases))
    assert tested.returncode == 0, tested.stdout.decode() + tested.stderr.decode()


def test_the_example_scrape_config_is_valid() -> None:
    config = ALERTS.parent / "prometheus.yml"
    checked = promtool("check", "config", str(config))
    assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()
