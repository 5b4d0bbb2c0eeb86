"""Access to the Redis that holds the boards."""

from __future__ import annotations

from typing import cast

import redis
from django_redis import get_redis_connection


def get_board_redis() -> redis.Redis:
    """The pooled client for the boards' Redis (settings.CACHES["boards"]).

    Responses are bytes: member ids and scores are parsed by the callers that know their type.
    """
    return cast(redis.Redis, get_redis_connection("boards"))
