"""A task for the broker-restart test only (the worker loads it with ``--include``).

It outlasts a broker restart on purpose: it counts its start, works for a while, then counts
its end, in the boards' Redis under the test's key prefix (not in the broker being restarted).
A run that is in flight when the broker goes away must still end, and the runs after it too.
"""

from __future__ import annotations

import time

from celery import shared_task
from django.conf import settings

from leaderboard.redis import get_board_redis

RUN_SECONDS = 2.0


def started_key() -> str:
    return f"{settings.LEADERBOARD_KEY_PREFIX}:probe:started"


def finished_key() -> str:
    return f"{settings.LEADERBOARD_KEY_PREFIX}:probe:finished"


@shared_task(name="tests.probe.slow_tick", ignore_result=True)
def slow_tick() -> None:
    client = get_board_redis()
    client.incr(started_key())
    time.sleep(RUN_SECONDS)
    client.incr(finished_key())
