"""The staff dashboard (/admin/dashboard, linked from the admin index): the last hour of
ingestion as charts, the latest dead letters with their reasons, per live season its
boards' sizes, top-snapshot ages and latest rebuild and reconcile runs, and each webhook
endpoint's deliveries.

Each source fails on its own: Redis or Kafka being down shows as a message in its section,
never as a 500, since that is exactly when staff open this page.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib import admin
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from kafka.errors import KafkaError
from redis.exceptions import RedisError

from ingestion.dead_letter_tail import dead_letters_latest
from ingestion.history import ingest_history_get
from ingestion.selectors import ingest_consumer_stats_list
from leaderboard.selectors.boards import BoardRef, board_list_live
from leaderboard.selectors.runs import board_runs_latest
from leaderboard.selectors.sizes import board_sizes_get
from leaderboard.selectors.top import top_snapshot_times_get
from seasons.selectors import SeasonRef
from webhooks.selectors import WebhooksOverview, webhooks_overview

from .charts import time_chart_svg

logger = logging.getLogger(__name__)

BUCKET_SECONDS = 60
DEAD_LETTERS_SHOWN = 20
RUNS_SHOWN = 5
# The page reloads itself this often (a meta refresh: no JavaScript in the admin).
REFRESH_SECONDS = 30


@dataclass(frozen=True)
class BoardRow:
    board: BoardRef
    size: int | None
    snapshot_age_seconds: float | None


@dataclass(frozen=True)
class SeasonPanel:
    season: SeasonRef
    boards: list[BoardRow]
    rebuilds: list[Any]
    reconciles: list[Any]


def _season_panels(now: float, errors: list[str]) -> list[SeasonPanel]:
    boards = board_list_live()
    try:
        sizes: dict[int, int] = board_sizes_get(boards=boards)
        snapshots = top_snapshot_times_get(boards=boards)
    except RedisError as exc:
        errors.append(f"Board sizes and snapshots unavailable: Redis did not answer ({exc}).")
        sizes, snapshots = {}, {}
    by_season: dict[int, list[BoardRef]] = defaultdict(list)
    for board in boards:
        by_season[board.season_id].append(board)
    panels = []
    for season_boards in by_season.values():
        season = season_boards[0].season
        rebuilds, reconciles = board_runs_latest(season_id=season.id, limit=RUNS_SHOWN)
        rows = []
        for board in season_boards:
            generated = snapshots.get(board.id)
            age = None if generated is None else max(0.0, now - generated)
            rows.append(BoardRow(board=board, size=sizes.get(board.id), snapshot_age_seconds=age))
        panels.append(SeasonPanel(season, rows, rebuilds, reconciles))
    return panels


def _webhooks(now: float, errors: list[str]) -> WebhooksOverview | None:
    try:
        return webhooks_overview(now=now)
    except (RedisError, DatabaseError) as exc:
        errors.append(f"Webhook figures unavailable: {exc}")
        return None


# Each section of the dashboard and the model permission that shows it: what the section
# shows comes from those models' data (raw match results in the dead letters, webhook URLs and
# their errors, each season's runs), which staff without it cannot see in the admin either.
SECTION_PERMISSIONS = {
    "ingestion": "leaderboard.view_matchresult",
    "seasons": "seasons.view_season",
    "webhooks": "webhooks.view_webhookendpoint",
}


def _ingestion(now: float, errors: list[str]) -> tuple[dict[str, Any], list[Any]]:
    """The ingest charts and the consumers reporting now."""
    try:
        history = ingest_history_get(now=now, bucket_seconds=BUCKET_SECONDS)
        consumers = ingest_consumer_stats_list()
    except RedisError as exc:
        errors.append(f"Ingestion history unavailable: Redis did not answer ({exc}).")
        return {}, []
    charts = {
        "rate": time_chart_svg(
            title="Results applied per second (all consumers), last hour",
            values=[p.applied_per_second for p in history],
            unit="results/s",
        ),
        "lag": time_chart_svg(
            title="Consumer lag in messages (all consumers), last hour",
            values=[p.lag for p in history],
            unit="messages",
        ),
        "dead_letters": time_chart_svg(
            title="Dead letters per minute, last hour",
            values=[p.dead_letters for p in history],
            unit="letters/min",
            bars=True,
        ),
    }
    return charts, list(consumers)


def _dead_letters() -> tuple[list[Any], str]:
    """The newest dead letters, or why they could not be read."""
    try:
        return list(
            dead_letters_latest(
                topic=settings.KAFKA_DEAD_LETTER_TOPIC,
                bootstrap_servers=settings.KAFKA_BOOTSTRAP_SERVERS,
                limit=DEAD_LETTERS_SHOWN,
            )
        ), ""
    except (KafkaError, OSError) as exc:
        logger.warning("dashboard: could not read the dead-letter topic: %s", exc)
        return [], f"Could not read {settings.KAFKA_DEAD_LETTER_TOPIC}: {exc}"


def staff_dashboard(request: HttpRequest) -> HttpResponse:
    now = time.time()
    can = {name: request.user.has_perm(perm) for name, perm in SECTION_PERMISSIONS.items()}
    errors: list[str] = []
    # A section the staff member may not see is not read at all.
    charts, consumers = _ingestion(now, errors) if can["ingestion"] else ({}, [])
    dead_letters, dead_letter_error = _dead_letters() if can["ingestion"] else ([], "")
    context = {
        **admin.site.each_context(request),
        "title": "Live dashboard",
        "charts": charts,
        # (stats, seconds since its last report): staff read an age, not a unix time.
        "consumers": [(c, max(0, round(now - c.updated_at))) for c in consumers],
        "dead_letters": dead_letters,
        "dead_letter_error": dead_letter_error,
        "dead_letter_topic": settings.KAFKA_DEAD_LETTER_TOPIC,
        "seasons": _season_panels(now, errors) if can["seasons"] else [],
        "webhooks": _webhooks(now, errors) if can["webhooks"] else None,
        "can": can,
        "errors": errors,
        "stale_after": settings.LEADERBOARD_TOP_SNAPSHOT_MAX_AGE_SECONDS,
        "refresh_seconds": REFRESH_SECONDS,
    }
    return TemplateResponse(request, "admin/dashboard.html", context)
