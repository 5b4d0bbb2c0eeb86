"""Redis losing boards: noticed and repaired without anyone typing a command.

Run: ``DJANGO_TEST_DATABASE_NAME=test_lb_x .venv/bin/pytest tests/faults/test_redis_loss.py -s``
(the seconds from the loss to exact boards are logged as ``redis loss: exact ...``).

The "beat" here is a thread that runs the recovery task's body every second (production: every
5 s from Celery beat, leaderboard_project/schedules.py); the consumer is the real one, reading a
real topic. Figures: docs/reliability.md.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from ingestion.consumer import IngestTotals, MatchResultConsumer
from leaderboard import keys
from leaderboard.models import ScoringRule
from leaderboard.selectors.boards import board_list_open
from leaderboard.services import board_recover, boards_lost_get, boards_recover
from leaderboard.tasks import boards_recover_task, build_weekly_boards
from tests.helpers import board_read, expected_board, main_board, make_live_season, wait_until
from tests.ingestion.ingest_helpers import Result, consumer_options, publish_results

pytestmark = pytest.mark.django_db(transaction=True)
logger = logging.getLogger(__name__)

PLAYERS = 300


def _results(season_id: int, days: list[date], count: int, rng: random.Random) -> list[Result]:
    now = timezone.now()
    out = []
    for _ in range(count):
        day = rng.choice(days)
        at = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(
            seconds=rng.randint(0, 86_399)
        )
        # Never in the future (the consumer dead-letters those).
        at = min(at, now - timedelta(seconds=rng.randint(60, 3600)))
        out.append(Result(uuid.uuid4(), rng.randint(1, PLAYERS), season_id, rng.randint(1, 50), at))
    return out


def _delete_board_keys(client: Any, board_id: int) -> int:
    found = list(client.scan_iter(match=keys.board_pattern(board_id=board_id), count=1000))
    return int(client.delete(*found)) if found else 0


def _boards_equal_reference(client: Any, ref: Any, results: list[Result]) -> list[str]:
    """What differs from the reference: season-long, every daily and every weekly board."""
    wrong = []
    if board_read(client, keys.board(board_id=ref.id)) != expected_board(ref, results):
        wrong.append("season")
    days = sorted({r.achieved_at.astimezone(UTC).date() for r in results})
    for day in days:
        key = keys.daily_board(board_id=ref.id, day=day)
        if board_read(client, key) != expected_board(ref, results, day=day):
            wrong.append(f"day {day}")
    for iso_year, iso_week in sorted({d.isocalendar()[:2] for d in days}):
        week = [
            r
            for r in results
            if r.achieved_at.astimezone(UTC).isocalendar()[:2] == (iso_year, iso_week)
        ]
        key = keys.weekly_board(board_id=ref.id, iso_year=iso_year, iso_week=iso_week)
        if board_read(client, key) != expected_board(ref, week):
            wrong.append(f"week {iso_year}-W{iso_week}")
    return wrong


@pytest.mark.slow
def test_board_keys_deleted_mid_ingest_come_back_exact_and_reads_never_lie(
    board_redis, topic_and_dlq, settings
):
    # Cumulative: a result lost or counted twice changes a sum, and a player's points never go
    # down, so any 200 showing fewer players or fewer points than an earlier one is a lie.
    now = timezone.now()
    season = make_live_season(rule=ScoringRule.CUMULATIVE)
    ref = main_board(season.id)
    topic, dlq = topic_and_dlq("redis-loss", partitions=2)
    options = consumer_options(topic=topic, dead_letter_topic=dlq, max_poll_records=40)
    # The tasks read the configured topic and group: this test's.
    settings.KAFKA_MATCH_RESULTS_TOPIC = topic
    settings.KAFKA_CONSUMER_GROUP = options.group_id

    rng = random.Random(11)
    today = now.astimezone(UTC).date()
    this_week = [today - timedelta(days=n) for n in range(today.weekday() + 1)]
    last_week = [today - timedelta(days=today.weekday() + n) for n in range(1, 8)]
    # Wave 1 (consumed before the loss): last week and this week; wave 2 (in flight during the
    # loss): this week only.
    wave1 = _results(season.id, last_week + this_week, 1500, rng)
    wave2 = _results(season.id, this_week, 3000, rng)
    results = wave1 + wave2
    publish_results(topic, wave1)

    stop = threading.Event()
    totals: list[IngestTotals] = []
    errors: list[BaseException] = []

    def guarded(fn: Any) -> Any:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # surfaced by the test
                errors.append(exc)
                stop.set()
            finally:
                connection.close()

        return run

    def consume() -> None:
        totals.append(
            MatchResultConsumer(options).run(
                until=lambda t: t.records >= len(results), max_seconds=240
            )
        )

    def beat() -> None:
        # Beat's schedule, compressed: recovery every second (5 s in production), and the
        # weekly boards' refresh (a projection of the daily boards that lags them by its
        # interval, 300 s in production, loss or not) every other second.
        tick = 0
        while not stop.is_set():
            boards_recover_task()
            if tick % 2 == 0:
                build_weekly_boards()
            tick += 1
            stop.wait(1.0)

    reads: list[tuple[float, int, dict[int, int] | None, dict[str, str]]] = []

    def read() -> None:
        client = Client()
        url = f"/api/seasons/{season.id}/leaderboard/ranks?start=1&count=1000"
        while not stop.is_set():
            response = client.get(url)
            body = response.json()
            seen = (
                {e["playerId"]: e["points"] for e in body} if response.status_code == 200 else None
            )
            reads.append(
                (
                    time.monotonic(),
                    response.status_code,
                    seen,
                    {"retry": response.get("Retry-After", ""), "detail": str(body)[:200]},
                )
            )
            time.sleep(0.02)

    threads = [threading.Thread(target=guarded(f)) for f in (consume, beat)]
    for t in threads:
        t.start()
    wait_until(
        lambda: (
            bool(errors)
            or (
                board_redis.exists(keys.board_intact(board_id=ref.id))
                and board_redis.zcard(keys.board(board_id=ref.id)) > 0
            )
        ),
        timeout=60,
        every=0.2,
    )
    assert not errors, errors
    reader = threading.Thread(target=guarded(read))
    reader.start()
    threads.append(reader)
    # Wave 1 on the boards, then wave 2 while the keys go.
    wait_until(
        lambda: board_redis.zcard(keys.board(board_id=ref.id)) == len(expected_board(ref, wave1)),
        timeout=60,
        every=0.2,
    )
    publisher = threading.Thread(target=guarded(lambda: publish_results(topic, wave2)))
    publisher.start()
    threads.append(publisher)
    wait_until(lambda: _applied_some(board_redis, ref, wave1), timeout=60, every=0.05)
    lost_at = time.monotonic()
    deleted = _delete_board_keys(board_redis, ref.id)
    assert deleted >= 3  # season-long, daily boards, watermark, intact key at least

    exact_at = None
    deadline = lost_at + 60
    while time.monotonic() < deadline and not errors:
        if (
            totals
            and board_redis.exists(keys.board_intact(board_id=ref.id))
            and not _boards_equal_reference(board_redis, ref, results)
        ):
            exact_at = time.monotonic()
            break
        time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert totals
    assert totals[0].records == len(results)
    assert exact_at is not None, _boards_equal_reference(board_redis, ref, results)

    # Reads: 503 with Retry-After and a reason during the gap, and no 200 ever went back.
    unavailable = [r for r in reads if r[1] == 503]
    gap = [r for r in unavailable if r[0] >= lost_at]
    logger.warning(
        "redis loss: exact %.1f s after the keys were deleted; %d reads, %d answered 503 "
        "(first %.2f s, last %.2f s after the loss), %d results",
        exact_at - lost_at,
        len(reads),
        len(unavailable),
        (gap[0][0] - lost_at) if gap else -1,
        (gap[-1][0] - lost_at) if gap else -1,
        len(results),
    )
    assert unavailable, "no read fell into the gap"
    assert all(r[3]["retry"] and "recovered" in r[3]["detail"] for r in unavailable)
    assert {r[1] for r in reads} <= {200, 503}
    best: dict[int, int] = {}
    for at, _status, seen, _ in reads:
        if seen is None:
            continue
        for player, points in best.items():
            assert seen.get(player, -1) >= points, (
                f"player {player} went back at {at - lost_at:.2f}s"
            )
        best.update(seen)


def _applied_some(client: Any, ref: Any, wave1: list[Result]) -> bool:
    """Wave 2 has started to land: the board holds more than wave 1."""
    size = client.zcard(keys.board(board_id=ref.id))
    return size > len(expected_board(ref, wave1)) or sum(
        int(s) for _, s in client.zrange(keys.board(board_id=ref.id), 0, -1, withscores=True)
    ) > sum(expected_board(ref, wave1).values())


def test_lost_last_writes_are_found_by_the_full_reconcile_and_repaired(board_redis):
    """A Redis restarted from an AOF without its last second: about 100 players of 3,000 hold
    an older score or are missing; the count alone may even agree. The reconcile finds them."""
    from leaderboard.models import MatchResult, ReconcileRun

    now = timezone.now()
    season = make_live_season(rule=ScoringRule.CUMULATIVE)
    ref = main_board(season.id)
    rng = random.Random(5)
    MatchResult.objects.bulk_create(
        MatchResult(
            season_id=season.id,
            board_id=ref.id,
            match_id=uuid.uuid4(),
            player_id=player,
            points=rng.randint(1, 500),
            achieved_at=now - timedelta(hours=rng.randint(1, 48)),
            kafka_partition=0,
            kafka_offset=player,
        )
        for player in range(1, 3001)
    )
    # Redis gets the board as PostgreSQL holds it (the results were stored behind its back).
    board_recover(board=ref, reason="the test's stored results", now=now)
    assert not boards_lost_get(boards=board_list_open())
    key = keys.board(board_id=ref.id)
    assert board_read(board_redis, key) == expected_board(ref, MatchResult.objects.all())

    # The lost second: 60 players lose their last result's points, 40 vanish.
    victims = rng.sample(range(1, 3001), 100)
    for player in victims[:60]:
        board_redis.zincrby(key, -(2**ref.codec.time_bits), str(player))
    board_redis.zrem(key, *[str(p) for p in victims[60:]])
    # ... and the watermark its last moves, written in the same scripts.
    watermark = keys.ingest_applied_offsets(board_id=ref.id, topic=_topic())
    board_redis.hset(watermark, "0", "2900")

    # ... and Redis comes back with a new run id, which the recovery notices.
    board_redis.set(keys.redis_run_id_seen(), f"an-older-run {time.time() - 5:.3f}")
    board_redis.delete(keys.board_checked(board_id=ref.id))  # never persisted

    started = time.monotonic()
    report = boards_recover()
    logger.warning(
        "lost last writes: 100 of 3000 players found and repaired in %.2f s",
        time.monotonic() - started,
    )
    assert report.redis_restarted
    (result,) = [r for r in report.reconciled if r.board_id == ref.id and r.day is None]
    assert result.full
    assert result.drift_found
    run = ReconcileRun.objects.get(pk=int(result.run_id or 0))
    assert run.mismatched_scores == 100
    assert run.rebuilt
    assert [r.board_id for r in report.recovered] == [ref.id]
    assert board_read(board_redis, key) == expected_board(ref, MatchResult.objects.all())
    # The watermark covers every stored result again: a replay counts none of them twice.
    assert board_redis.hget(watermark, "0") == b"3000"


def _topic() -> str:
    from django.conf import settings

    return str(settings.KAFKA_MATCH_RESULTS_TOPIC)


def test_reads_of_a_lost_board_answer_503_until_the_recovery_rebuilds_it(board_redis, client):
    from leaderboard.models import MatchResult

    now = timezone.now()
    season = make_live_season()
    ref = main_board(season.id)
    day = (now - timedelta(days=3)).astimezone(UTC).date()
    MatchResult.objects.create(
        season_id=season.id,
        board_id=ref.id,
        match_id=uuid.uuid4(),
        player_id=7,
        points=42,
        achieved_at=datetime(day.year, day.month, day.day, 12, tzinfo=UTC),
    )
    # The new board was marked intact on creation; Redis then loses everything of it.
    assert board_redis.exists(keys.board_intact(board_id=ref.id))
    _delete_board_keys(board_redis, ref.id)
    base = f"/api/seasons/{season.id}/leaderboard"
    week = "{}-W{:02d}".format(*day.isocalendar()[:2])
    urls = [
        f"{base}/top",
        f"{base}/ranks",
        f"{base}/players/7",
        f"{base}/players/7/around",
        f"{base}/friends?ids=7",
        f"{base}/daily/{day.isoformat()}/top",
        f"{base}/weekly/{week}/top",
    ]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 503, (url, response.content)
        assert int(response["Retry-After"]) > 0
        assert "recovered" in response.json()["detail"]
    health = client.get("/healthz").json()
    assert ref.id in health["boards"]["missing"]
    assert health["status"] == "degraded"

    report = boards_recover()
    assert [r.board_id for r in report.recovered] == [ref.id]
    assert report.recovered[0].days == (day,)
    for url in urls:
        assert client.get(url).status_code == 200, url
    assert client.get(f"{base}/daily/{day.isoformat()}/top").json()[0]["points"] == 42
    assert client.get(f"{base}/weekly/{week}/top").json()[0]["points"] == 42
    assert client.get("/healthz").json()["boards"]["missing"] == []

    # A second look finds nothing to do: the checks are cheap when all is well.
    assert boards_recover().recovered == ()
