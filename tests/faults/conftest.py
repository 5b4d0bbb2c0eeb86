"""The fault suite: each case records an Outcome; the run ends with a table of them (the
figures docs/reliability.md quotes) and, with FAULTS_REPORT=path, the same as JSON."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

import pytest
from django.conf import settings

from .fault_helpers import OUTCOMES, Outcome


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
        outcome.seconds = round(time.monotonic() - started, 1)
        OUTCOMES.append(outcome)


def pytest_terminal_summary(terminalreporter) -> None:
    if not OUTCOMES:
        return
    terminalreporter.section("fault suite")
    header = (
        "| case | fault | results | seconds to exact | lost | doubled | case seconds | note "
        "| reads during the case |"
    )
    terminalreporter.write_line(header)
    for o in OUTCOMES:
        # A case that never got exact (an xfail) records -1: "not exact", never a figure.
        exact = f"{o.seconds_to_exact:.1f}" if o.seconds_to_exact >= 0 else "not exact"
        lost, doubled = (o.lost, o.doubled) if o.lost >= 0 else ("-", "-")
        terminalreporter.write_line(
            f"| {o.case} | {o.fault} | {o.results} ({o.messages} messages) | "
            f"{exact} | {lost} | {doubled} | {o.seconds} | {o.note} | "
            f"{o.reads.describe() if o.reads is not None else '-'} |"
        )
    path = os.environ.get("FAULTS_REPORT")
    if path:
        with open(path, "w") as out:
            json.dump([asdict(o) for o in OUTCOMES], out, indent=2)
