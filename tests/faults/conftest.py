"""The fault suite: each case records an Outcome; the run ends with a table of them (the
figures docs/reliability.md quotes) and, with FAULTS_REPORT=path, the same as JSON."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, replace
from typing import Any

import pytest
from django.conf import settings

from .fault_helpers import OUTCOMES, Outcome, TableRow


@pytest.fixture(autouse=True)
def _single_node_services() -> None:
    # The cuts go through a proxy in front of the single broker's FAULTS listener and the
    # standalone services; the clusters' own failures are in tests/infra/.
    if settings.LB_REDIS_MODE == "cluster" or settings.LB_KAFKA_BROKERS != 1:
        pytest.skip("the fault suite runs against the single-node services")


@pytest.fixture
def record(request) -> Iterator[Any]:
    """``record(outcome)``: keep a case's figures; its whole duration is measured here."""
    started = time.monotonic()
    kept: list[Outcome] = []
    yield kept.append
    for outcome in kept:
        OUTCOMES.append(replace(outcome, seconds=round(time.monotonic() - started, 1)))


def pytest_terminal_summary(terminalreporter) -> None:
    if not OUTCOMES:
        return
    terminalreporter.section("fault suite")
    terminalreporter.write_line(TableRow.header())
    for outcome in OUTCOMES:
        terminalreporter.write_line(TableRow.of(outcome).line())
    path = os.environ.get("FAULTS_REPORT")
    if path:
        with open(path, "w") as out:
            json.dump([asdict(o) for o in OUTCOMES], out, indent=2)
