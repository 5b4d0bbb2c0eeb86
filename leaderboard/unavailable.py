"""Why a request cannot be answered now: a 503 with Retry-After, never a 500 or a wrong answer.

One classification for every view: the read API's exception handler
(``leaderboard.apis.api_exception_handler``) answers its views with it, and
``leaderboard_project.middleware.UnavailableMiddleware`` every other view (the HTML pages, the
admin, the ingestion door). Three causes, each with its own ``code`` in the JSON body:

- ``database_unavailable``: PostgreSQL down or unreachable (``seasons.memo.DATABASE_UNREACHABLE``);
- ``redis_unavailable``: the boards' Redis (standalone or cluster) down, restarting, loading its
  dataset, busy or failing over (``leaderboard.redis.redis_unavailable``);
- ``board_recovering``: Redis answers but lost the board, which is being rebuilt
  (``leaderboard.selectors.rankings.BoardUnavailableError``);
- ``week_unavailable``: a week's board is missing, being built by another request or not
  buildable for now (``leaderboard.services.WeeklyBoardUnavailableError``).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from seasons.memo import DATABASE_UNREACHABLE

from .redis import redis_unavailable
from .selectors.rankings import BoardUnavailableError
from .services import WeeklyBoardUnavailableError

DATABASE_UNAVAILABLE_DETAIL = "the database is unavailable; retry later"
REDIS_UNAVAILABLE_DETAIL = "the boards' Redis is unavailable; retry later"

# Seconds a client is told to wait while a lost board is rebuilt: the recovery task looks every
# few seconds, and a rebuild of a typical board takes about as long (docs/reliability.md).
RECOVERY_RETRY_AFTER_SECONDS = 5
# Seconds a client is told to wait while Redis does not answer: a restart or a failover takes
# seconds, and a client that waits longer than the outage only sees stale data for longer.
REDIS_RETRY_AFTER_SECONDS = 5


@dataclass(frozen=True, slots=True)
class Unavailable:
    detail: str
    code: str
    retry_after: int
    # Whether the boards (Redis) are the cause: the pages then say the rankings cannot be read.
    boards: bool

    def body(self) -> dict[str, str]:
        return {"detail": self.detail, "code": self.code}

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


def unavailable_of(exc: BaseException) -> Unavailable | None:
    """What to answer for ``exc`` when it means "try again shortly"; None for any other error
    (a bug stays a 500)."""
    if isinstance(exc, BoardUnavailableError):
        return Unavailable(
            detail=str(exc),
            code="board_recovering",
            retry_after=RECOVERY_RETRY_AFTER_SECONDS,
            boards=True,
        )
    if isinstance(exc, WeeklyBoardUnavailableError):
        return Unavailable(
            detail=str(exc), code="week_unavailable", retry_after=exc.retry_after, boards=True
        )
    if isinstance(exc, DATABASE_UNREACHABLE):
        return Unavailable(
            detail=DATABASE_UNAVAILABLE_DETAIL,
            code="database_unavailable",
            retry_after=settings.DATABASE_UNAVAILABLE_RETRY_AFTER_SECONDS,
            boards=False,
        )
    if redis_unavailable(exc):
        return Unavailable(
            detail=REDIS_UNAVAILABLE_DETAIL,
            code="redis_unavailable",
            retry_after=REDIS_RETRY_AFTER_SECONDS,
            boards=True,
        )
    return None
