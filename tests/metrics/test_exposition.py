"""What each process exposes: /metrics (web), a consumer's counters, Celery task outcomes."""

from __future__ import annotations

import math
import time
import uuid
from datetime import timedelta

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from ingestion.consumer import MatchResultConsumer
from ingestion.metrics import partitions_observe
from ingestion.schema import MESSAGE_CODES
from leaderboard.models import RefusalCode, ScoringRule
from leaderboard.services import top_snapshot_refresh
from leaderboard.tasks import refresh_top_snapshots
from seasons.models import SeasonStatus
from tests.factories import board_factory
from tests.helpers import as_board, make_season
from tests.ingestion.ingest_helpers import Result, consumer_options, publish, publish_results
from tests.leaderboard.board_fixtures import write_season_board

from .prom import ensure_prometheus, promtool


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.mark.django_db
def test_metrics_is_prometheus_text_with_requests_and_boards(client, board_redis) -> None:
    ensure_prometheus()
    season = make_season(status=SeasonStatus.ACTIVE)
    write_season_board(board_redis, season)  # 7 players on the main board
    board_factory(season, "kills")  # an empty board whose snapshot was never built
    top_snapshot_refresh(board=as_board(season))
    healthz = {"view": "healthz", "method": "GET", "status": "200"}
    unresolved = {"view": "<unresolved>", "method": "GET", "status": "404"}
    before = _value("leaderboard_http_requests_total", **healthz)
    before_404 = _value("leaderboard_http_requests_total", **unresolved)

    assert client.get("/healthz").status_code == 200
    assert client.get(f"/no-such-page/{uuid.uuid4()}").status_code == 404
    # A method a client made up is one series, whatever it is (it was one per method: any
    # client could grow /metrics without bound).
    made_up = [f"Z{uuid.uuid4().hex[:8].upper()}" for _ in range(3)]
    for method in made_up:
        client.generic(method, "/healthz")
    response = client.get("/metrics")

    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    text = response.content.decode()
    samples = _samples(text)

    def sample(name: str, **labels: str) -> float:
        return samples[(name, frozenset(labels.items()))]

    assert sample("leaderboard_http_requests_total", **healthz) == before + 1
    # Any unknown path is one series, not one per path.
    assert sample("leaderboard_http_requests_total", **unresolved) == before_404 + 1
    assert not any(method in text for method in made_up)
    other = {"view": "healthz", "method": "other", "status": "405"}
    assert sample("leaderboard_http_requests_total", **other) >= 3
    assert sample("leaderboard_http_request_duration_seconds_count", **healthz) >= 1
    assert sample("leaderboard_http_request_duration_seconds_bucket", le="+Inf", **healthz) >= 1
    main = {"season": str(season.id), "board": "main"}
    kills = {"season": str(season.id), "board": "kills"}
    assert sample("leaderboard_board_size", **main) == 7
    assert sample("leaderboard_board_size", **kills) == 0
    assert 0 <= sample("leaderboard_top_snapshot_age_seconds", **main) < 60
    assert math.isinf(sample("leaderboard_top_snapshot_age_seconds", **kills))
    assert sample("leaderboard_boards_collector_up") == 1

    checked = promtool("check", "metrics", stdin=response.content)
    assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()


@pytest.mark.django_db
def test_a_closed_season_has_no_board_series(client, board_redis) -> None:
    season = make_season(status=SeasonStatus.CLOSED)
    write_season_board(board_redis, season)
    text = client.get("/metrics").content.decode()
    assert f'season="{season.id}"' not in text


@pytest.mark.django_db
def test_metrics_json_still_serves_the_consumers_stats(client) -> None:
    body = client.get("/metrics.json").json()
    assert set(body["ingestion"]) == {"consumers", "appliedPerSecond", "lag"}


@pytest.mark.django_db
def test_celery_task_outcome_and_duration_are_counted() -> None:
    labels = {"task": "leaderboard.tasks.refresh_top_snapshots", "outcome": "SUCCESS"}
    before = _value("leaderboard_celery_tasks_total", **labels)
    before_count = _value("leaderboard_celery_task_duration_seconds_count", **labels)

    refresh_top_snapshots.apply()

    assert _value("leaderboard_celery_tasks_total", **labels) == before + 1
    assert _value("leaderboard_celery_task_duration_seconds_count", **labels) == before_count + 1


@pytest.mark.django_db(transaction=True)
def test_consumer_counts_results_dead_letters_by_reason_lag_and_offsets(
    topic_and_dlq,
) -> None:
    topic, dlq = topic_and_dlq("ingest")
    season = make_season(rule=ScoringRule.BEST)
    when = season.starts_at + timedelta(days=1)
    results = [Result(uuid.uuid4(), 10 + n, season.id, 100 + n, when) for n in range(5)]
    publish_results(topic, [*results, results[0]])  # the last one is a duplicate
    publish(topic, [(b"1", b"not json"), (b"2", b'{"matchId": "x"}')])
    t = {"topic": topic}

    totals = MatchResultConsumer(consumer_options(topic=topic, dead_letter_topic=dlq)).run(
        until=lambda totals: totals.records >= 8, max_seconds=90
    )

    assert (totals.applied, totals.duplicates, totals.dead_letters) == (5, 1, 2)
    assert _value("leaderboard_ingest_records_total", **t) == 8
    assert _value("leaderboard_ingest_results_applied_total", **t) == 5
    assert _value("leaderboard_ingest_duplicates_total", **t) == 1
    # Five first entries: a personal_best and a rank_changed each, at least.
    assert _value("leaderboard_ingest_rank_events_total", **t) == totals.rank_events >= 10
    reasons = {
        sample.labels["reason"]: sample.value
        for family in REGISTRY.collect()
        if family.name == "leaderboard_ingest_dead_letters"
        for sample in family.samples
        if sample.labels.get("topic") == topic and sample.name.endswith("_total")
    }
    assert sum(reasons.values()) == 2, reasons
    # Every reason's series exists from the start, at 0 until its first letter.
    assert set(reasons) >= {*MESSAGE_CODES, *RefusalCode.values}, reasons
    assert reasons["not_utf8"] == 0
    assert time.time() - 60 < _value("leaderboard_ingest_loop_timestamp_seconds", **t)
    assert _value("leaderboard_ingest_batch_apply_seconds_count", **t) >= 1
    assert _value("leaderboard_ingest_committed_offset", partition="0", **t) == 8
    assert _value("leaderboard_ingest_lag", partition="0", **t) == 0


def test_a_partition_no_longer_assigned_loses_its_lag_and_committed_offset_series() -> None:
    topic = f"revoked-{uuid.uuid4().hex[:8]}"
    t = {"topic": topic}
    partitions_observe(topic=topic, lag={0: 5, 1: 7}, committed={0: 10, 1: 20}, assigned={0, 1})
    assert _value("leaderboard_ingest_committed_offset", partition="1", **t) == 20
    # A rebalance in progress (nothing assigned for a moment): the offsets stay as they were.
    partitions_observe(topic=topic, lag={}, committed={0: 10, 1: 20}, assigned=set())
    assert _value("leaderboard_ingest_committed_offset", partition="1", **t) == 20
    # Partition 1 went to another consumer, which reports it from now on.
    partitions_observe(topic=topic, lag={0: 5}, committed={0: 12, 1: 20}, assigned={0})
    assert _value("leaderboard_ingest_committed_offset", partition="0", **t) == 12
    series = {
        (sample.name, sample.labels["partition"])
        for family in REGISTRY.collect()
        for sample in family.samples
        if sample.labels.get("topic") == topic
    }
    assert series == {
        ("leaderboard_ingest_lag", "0"),
        ("leaderboard_ingest_committed_offset", "0"),
    }
