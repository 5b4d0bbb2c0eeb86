"""Fixtures of the webhook tests: a rank-events topic of the test's own, local receivers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from .webhook_helpers import Receiver


@pytest.fixture
def events_topics(topic_and_dlq) -> tuple[str, str]:
    """A fresh rank-events topic (two partitions) and its dead-letter topic."""
    return topic_and_dlq("rank-events", partitions=2)


@pytest.fixture
def receiver_factory() -> Iterator[Callable[..., Receiver]]:
    """``receiver_factory(behaviour=..., delay=..., hold=...)``: a local HTTP receiver, shut
    down when the test ends."""
    made: list[Receiver] = []

    def make(**kwargs: Any) -> Receiver:
        receiver = Receiver(**kwargs)
        made.append(receiver)
        return receiver

    yield make
    for receiver in made:
        receiver.close()
