"""Close-out waits for the consumer to drain the results queued in Kafka (real Kafka, PG, Redis).

A result achieved before the season's end may still sit in the topic when the season switches
to closing: it must still count, and the final standings must wait for it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from io import StringIO
from itertools import pairwise
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction

from closeout.models import FinalStanding, RewardGrant
from closeout.services import (
    CloseOutcome,
    CloseWaitingFor,
    SeasonCloseProgress,
    reward_tier_create,
    season_close,
    season_close_wait,
)
from ingestion.consumer import MatchResultConsumer
from ingestion.stats import IngestTotals
from leaderboard import keys
from seasons.models import Season, SeasonStatus
from seasons.services import season_status_transition, season_statuses_sync
from tests.factories import MatchResultFactory, SeasonFactory
from tests.helpers import board_read, main_board_id, subprocess_database_url, wait_until
from tests.ingestion.ingest_helpers import (
    Result,
    committed_offsets,
    consumer_options,
    end_offsets,
    publish_results,
)
from tests.ingestion.topic_reader import topic_read

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]

NOW = datetime.now(UTC).replace(microsecond=0)
START = NOW - timedelta(days=2)
END = NOW - timedelta(minutes=1)  # over: the status sync switches it to closing


@pytest.fixture
def drain(settings, topic_and_dlq):
    """The topic, its dead-letter topic, and consumer options of the group close-out checks."""
    topic, dlq = topic_and_dlq("close-drain", partitions=2)
    options = consumer_options(topic=topic, dead_letter_topic=dlq)
    settings.KAFKA_MATCH_RESULTS_TOPIC = topic
    settings.KAFKA_CONSUMER_GROUP = options.group_id
    settings.SEASON_CLOSE_DRAIN_TIMEOUT_SECONDS = 0.5  # each test decides how long to wait
    return topic, dlq, options


@pytest.fixture
def season() -> Season:
    season = SeasonFactory.create(starts_at=START, ends_at=END, status=SeasonStatus.ACTIVE)
    reward_tier_create(season_id=season.id, rank_from=1, rank_to=2, reward_name="gems")
    return season


def result(season: Season, player: int, points: int, achieved_at: datetime) -> Result:
    return Result(uuid.uuid4(), player, season.id, points, achieved_at)


def standings(season: Season) -> list[tuple[int, int, int]]:
    return [
        (s.rank, s.player_id, s.points)
        for s in FinalStanding.objects.filter(season=season).order_by("rank")
    ]


def consume_all(options, *, records: int) -> None:
    """Run a consumer until it has read ``records`` and committed the whole topic: a commit a
    group rebalance refused is made good by the batch read again after it (exactly once).

    A member whose rebalance does not finish (seen on a loaded machine: kafka-python's client
    never rejoined within 90 s) is stopped, leaving the group, and a new one takes over the
    same group, as a supervisor's restart would: what it reads again counts once."""
    ends = end_offsets(options.topic)
    read = 0

    def drained(t: IngestTotals) -> bool:
        return read + t.records >= records and all(
            t.positions.get(p, 0) >= end for p, end in ends.items() if end
        )

    for _ in range(3):
        totals = MatchResultConsumer(options).run(until=drained, max_seconds=30)
        if drained(totals):
            return
        read += totals.records
    raise AssertionError(f"three consumers of the group did not commit the topic: {totals}")


def test_queued_results_count_and_close_out_waits_for_the_drain(drain, season, board_redis):
    topic, dlq, options = drain
    queued = [
        result(season, 1, 50, END - timedelta(minutes=5)),
        result(season, 2, 70, END - timedelta(seconds=1)),
        result(season, 3, 40, END),  # the end itself is inside the window
    ]
    late = result(season, 9, 999, END + timedelta(seconds=1))
    publish_results(topic, [*queued, late])
    assert season_statuses_sync().closing == (season.id,)

    # Nobody consumes: the close-out must not finalize with results still queued.
    lagging = season_close(season_id=season.id, grace_seconds=0)
    assert lagging.outcome == CloseOutcome.LAGGING
    assert "NOT finalized" in lagging.describe()
    assert f"consumer group {options.group_id} has not drained topic {topic}" in lagging.lagging
    ends = end_offsets(topic)
    for partition, end in ends.items():
        if end:
            assert f"partition {partition} (nothing committed, needs {end}: {end} behind)" in (
                lagging.lagging
            )
    closing = Season.objects.get(id=season.id)
    assert closing.status == SeasonStatus.CLOSING
    recorded = closing.drain_end_offsets
    assert recorded is not None
    assert recorded["topic"] == topic
    assert {int(p): o for p, o in recorded["partitions"].items()} == ends
    assert (FinalStanding.objects.count(), RewardGrant.objects.count()) == (0, 0)

    # The command says the same once its timeout passed (exit 4); a rerun waits on the same
    # recorded offsets, not on what arrived since.
    straggler = result(season, 4, 60, END - timedelta(minutes=1))
    publish_results(topic, [straggler])
    with pytest.raises(CommandError, match=r"timed out.*NOT finalized.*lagging: partition") as e:
        call_command(
            "close_season", "--season", str(season.id), "--grace-seconds", "0", stdout=StringIO()
        )
    assert e.value.returncode == 4
    assert Season.objects.get(id=season.id).drain_end_offsets == recorded
    assert (FinalStanding.objects.count(), RewardGrant.objects.count()) == (0, 0)

    # The consumer drains the topic while the season is closing: the results achieved before
    # the end count, on the boards and in PostgreSQL; the one after the end is dead-lettered.
    consume_all(options, records=len(queued) + 2)
    assert committed_offsets(topic, options.group_id) == end_offsets(topic)
    on_board = board_read(board_redis, keys.board(board_id=main_board_id(season.id)))
    assert sorted(on_board) == [1, 2, 3, 4]
    # Dead letters are at least once: a member replaced mid-batch (consume_all) publishes its
    # batch's letter again. Every one is the late result's.
    letters = topic_read(dlq)
    assert letters
    assert {
        (dict(r.headers)["dlq.code"], dict(r.headers)["dlq.source.offset"], r.value)
        for r in letters
    } == {(b"outside_season", dict(letters[0].headers)["dlq.source.offset"], late.value())}

    done = season_close(season_id=season.id, grace_seconds=0)
    assert (done.outcome, done.standings, done.grants_created) == (CloseOutcome.CLOSED, 4, 2)
    assert standings(season) == [(1, 2, 70), (2, 4, 60), (3, 1, 50), (4, 3, 40)]
    assert sorted(RewardGrant.objects.values_list("rank", "player_id")) == [(1, 2), (2, 4)]
    again = season_close(season_id=season.id, grace_seconds=0)
    assert (again.outcome, again.grants_created) == (CloseOutcome.ALREADY_CLOSED, 0)


def test_force_skips_the_wait_and_counts_only_what_is_stored(drain, season):
    topic, _, _ = drain
    MatchResultFactory.create(
        season=season, player_id=1, points=10, achieved_at=END - timedelta(hours=1)
    )
    publish_results(topic, [result(season, 2, 70, END - timedelta(seconds=5))])
    out = StringIO()
    call_command("close_season", "--season", str(season.id), "--force", stdout=out)
    assert f"season {season.id} closed: 1 final standings, 1 reward grants" in out.getvalue()
    assert standings(season) == [(1, 1, 10)]
    assert Season.objects.get(id=season.id).drain_end_offsets is None


def test_a_reopened_season_drains_afresh(drain, season):
    topic, _, _ = drain
    asked = END - timedelta(minutes=10)
    season_status_transition(season_id=season.id, to_status="closing", now=asked)
    publish_results(topic, [result(season, 1, 5, asked)])
    first = season_close(season_id=season.id, now=asked, grace_seconds=0)
    assert first.outcome == CloseOutcome.LAGGING
    assert Season.objects.get(id=season.id).drain_end_offsets is not None
    # Reopened: the offsets recorded for the last closing no longer apply.
    reopened = season_status_transition(season_id=season.id, to_status="active", now=asked)
    assert reopened.drain_end_offsets is None
    assert Season.objects.get(id=season.id).drain_end_offsets is None


def test_the_task_waits_briefly_and_leaves_it_to_the_next_sweep(drain, season, settings):
    from closeout.tasks import season_close_task

    topic, _, _ = drain
    publish_results(topic, [result(season, 1, 5, END - timedelta(seconds=3))])
    settings.SEASON_CLOSE_GRACE_SECONDS = 0
    # The sweep queues the task for closing seasons (the end passed: the status sync did it).
    Season.objects.filter(id=season.id).update(status=SeasonStatus.CLOSING, closing_since=END)
    said = season_close_task.run(season_id=season.id)
    assert "is closing but NOT finalized" in said
    assert "lagging: partition" in said
    assert Season.objects.get(id=season.id).status == SeasonStatus.CLOSING
    assert RewardGrant.objects.count() == 0


def test_the_admin_action_reports_a_lagging_drain_as_an_error(drain, season, admin_client):
    from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME

    topic, _, _ = drain
    publish_results(topic, [result(season, 1, 5, END - timedelta(seconds=3))])
    Season.objects.filter(id=season.id).update(
        status=SeasonStatus.CLOSING, closing_since=NOW - timedelta(hours=1)
    )
    page = admin_client.post(
        "/admin/seasons/season/",
        {"action": "close_season", ACTION_CHECKBOX_NAME: [str(season.id)], "confirmed": "yes"},
        follow=True,
    )
    [message] = list(page.context["messages"])
    assert message.level_tag == "error"
    assert f"season {season.id} is closing but NOT finalized" in message.message
    assert "lagging: partition" in message.message
    assert Season.objects.get(id=season.id).status == SeasonStatus.CLOSING


def test_kafka_unreachable_finalizes_nothing(drain, season, settings):
    settings.KAFKA_BOOTSTRAP_SERVERS = ["127.0.0.1:1"]
    result_ = season_close(season_id=season.id, grace_seconds=0)
    assert result_.outcome == CloseOutcome.LAGGING
    assert "Kafka cannot tell" in result_.lagging
    assert Season.objects.get(id=season.id).status == SeasonStatus.CLOSING
    assert FinalStanding.objects.count() == 0


# --- close_season waits until the season is closed ----------------------------------------------


class _Lines(StringIO):
    """A command's stdout that other threads can watch while the command runs."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            return super().write(text)

    def text(self) -> str:
        with self._lock:
            return self.getvalue()


class _CommandThread(threading.Thread):
    """``close_season`` with ``args`` in a thread of its own, its outcome kept for the test."""

    def __init__(self, *args: str) -> None:
        super().__init__(daemon=True)
        self.args = args
        self.out = _Lines()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            call_command("close_season", *self.args, stdout=self.out)
        except BaseException as exc:  # handed to the test thread
            self.error = exc
        finally:
            connection.close()

    def outcome(self, *, timeout: float) -> str:
        self.join(timeout)
        assert not self.is_alive(), f"close_season still running:\n{self.out.text()}"
        if self.error is not None:
            raise self.error
        return self.out.text()


def test_the_command_waits_for_the_drain_and_exits_0_once_closed(drain, season, board_redis):
    topic, _, options = drain
    queued = [result(season, 1, 50, END - timedelta(minutes=5)), result(season, 2, 70, END)]
    publish_results(topic, queued)
    assert season_statuses_sync().closing == (season.id,)

    command = _CommandThread("--season", str(season.id), "--grace-seconds", "0", "--timeout", "90")
    command.start()
    # It is waiting on the queued results, and says so...
    wait_until(
        lambda: (
            f"waiting for consumer group {options.group_id} to drain topic {topic}"
            in command.out.text()
        ),
        timeout=30,
        context=command.out.text,
    )
    assert command.is_alive()
    assert Season.objects.get(id=season.id).status == SeasonStatus.CLOSING
    # ... until the consumer has drained them; then it closes the season and exits 0.
    consume_all(options, records=len(queued))
    said = command.outcome(timeout=60)
    assert f"season {season.id}: still closing after" in said
    assert f"season {season.id} closed: 2 final standings, 2 reward grants" in said
    assert Season.objects.get(id=season.id).status == SeasonStatus.CLOSED
    assert standings(season) == [(1, 2, 70), (2, 1, 50)]


def test_the_command_waits_through_the_grace(drain, season):
    # Nothing queued (the topic is empty): only the grace after the switch to closing is left.
    started = time.monotonic()
    out = StringIO()
    call_command(
        "close_season",
        "--season",
        str(season.id),
        "--grace-seconds",
        "1",
        "--timeout",
        "30",
        stdout=out,
    )
    assert time.monotonic() - started >= 1
    said = out.getvalue()
    assert "waiting for the grace for results published just after the end, until" in said
    assert f"season {season.id} closed: 0 final standings" in said
    assert Season.objects.get(id=season.id).status == SeasonStatus.CLOSED


def test_the_command_waits_for_another_close_out_holding_the_season(drain, season):
    season_statuses_sync()
    release = threading.Event()

    def hold_the_season() -> None:
        # As a running close-out does while it copies the standings: the row locked.
        try:
            with transaction.atomic():
                Season.objects.select_for_update(no_key=True).get(id=season.id)
                release.wait(30)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_the_season, daemon=True)
    holder.start()
    wait_until(lambda: _season_locked(season.id), timeout=10)
    command = _CommandThread("--season", str(season.id), "--grace-seconds", "0", "--timeout", "60")
    command.start()
    try:
        wait_until(
            lambda: "waiting for another close-out of it to finish" in command.out.text(),
            timeout=20,
            context=command.out.text,
        )
        assert command.is_alive()
    finally:
        release.set()
        holder.join(10)
    said = command.outcome(timeout=30)
    assert f"season {season.id} closed" in said
    assert Season.objects.get(id=season.id).status == SeasonStatus.CLOSED


def _season_locked(season_id: int) -> bool:
    with transaction.atomic():
        free = (
            Season.objects.select_for_update(no_key=True, skip_locked=True)
            .filter(id=season_id)
            .exists()
        )
    return not free


def test_the_command_times_out_with_exit_4_naming_what_lags(drain, season):
    topic, _, options = drain
    publish_results(topic, [result(season, 1, 50, END - timedelta(minutes=5))])
    out = StringIO()
    started = time.monotonic()
    with pytest.raises(CommandError) as raised:
        call_command(
            "close_season",
            "--season",
            str(season.id),
            "--grace-seconds",
            "0",
            "--timeout",
            "1",
            stdout=out,
        )
    assert 1 <= time.monotonic() - started < 20
    assert raised.value.returncode == 4
    message = str(raised.value)
    assert message.startswith(
        f"timed out: season {season.id} is not closed after 1 s (--timeout 1)"
    )
    assert f"consumer group {options.group_id} has not drained topic {topic}" in message
    assert "lagging: partition" in message
    assert f"waiting for consumer group {options.group_id} to drain topic {topic}" in (
        out.getvalue()
    )
    assert Season.objects.get(id=season.id).status == SeasonStatus.CLOSING
    assert (FinalStanding.objects.count(), RewardGrant.objects.count()) == (0, 0)


def test_no_wait_exits_3_while_the_season_is_closing_and_0_once_closed(drain, season):
    topic, _, _ = drain
    # Within the grace (30 s by default): it switches the season to closing and returns at once.
    started = time.monotonic()
    with pytest.raises(CommandError, match=f"season {season.id} is closing") as raised:
        call_command("close_season", "--season", str(season.id), "--no-wait", stdout=StringIO())
    assert time.monotonic() - started < 10
    assert raised.value.returncode == 3
    assert Season.objects.get(id=season.id).status == SeasonStatus.CLOSING

    # Past the grace, with results still queued: one look at the offsets, no wait.
    publish_results(topic, [result(season, 1, 50, END - timedelta(minutes=5))])
    with pytest.raises(CommandError, match=r"NOT finalized.*lagging: partition") as raised:
        call_command(
            "close_season",
            "--season",
            str(season.id),
            "--no-wait",
            "--grace-seconds",
            "0",
            stdout=StringIO(),
        )
    assert raised.value.returncode == 3
    assert Season.objects.get(id=season.id).status == SeasonStatus.CLOSING

    season_close(season_id=season.id, force=True)
    out = StringIO()
    call_command("close_season", "--season", str(season.id), "--no-wait", stdout=out)
    assert f"season {season.id} was already closed" in out.getvalue()

    with pytest.raises(CommandError, match="not allowed with argument"):
        call_command("close_season", "--season", str(season.id), "--no-wait", "--timeout", "5")
    with pytest.raises(CommandError, match="--timeout: must be 0 to"):
        call_command("close_season", "--season", str(season.id), "--timeout", "-1")


def test_no_wait_is_exit_status_3_of_the_process(drain, season, settings):
    """The code a shell sees: manage.py run as a process, on this test's database."""
    done = subprocess.run(
        [sys.executable, "manage.py", "close_season", "--season", str(season.id), "--no-wait"],
        cwd=ROOT,
        env=os.environ
        | {
            "DATABASE_URL": subprocess_database_url(),
            "DJANGO_TEST_DATABASE_NAME": "",
            "LEADERBOARD_KEY_PREFIX": settings.LEADERBOARD_KEY_PREFIX,
            "KAFKA_MATCH_RESULTS_TOPIC": settings.KAFKA_MATCH_RESULTS_TOPIC,
            "KAFKA_CONSUMER_GROUP": settings.KAFKA_CONSUMER_GROUP,
            "SEASON_CLOSE_GRACE_SECONDS": "300",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3, done.stderr
    assert f"season {season.id} is closing" in done.stderr
    assert Season.objects.get(id=season.id).status == SeasonStatus.CLOSING


def test_the_wait_reports_progress_once_per_interval(drain, season):
    topic, _, _ = drain
    publish_results(topic, [result(season, 1, 50, END - timedelta(minutes=5))])
    heard: list[SeasonCloseProgress] = []
    wait = season_close_wait(
        season_id=season.id,
        timeout_seconds=2.5,
        grace_seconds=0,
        on_progress=heard.append,
        progress_every_seconds=0.5,
    )
    assert not wait.closed
    assert wait.result.outcome == CloseOutcome.LAGGING
    assert (wait.timeout_seconds, wait.waited_seconds >= 2.5) == (2.5, True)
    # The drain is looked at every 0.25 s; one line per 0.5 s of it is passed on.
    assert len(heard) >= 2, heard
    assert {p.waiting_for for p in heard} == {CloseWaitingFor.DRAIN}
    elapsed = [p.elapsed_seconds for p in heard]
    assert all(later - earlier >= 0.5 for earlier, later in pairwise(elapsed)), elapsed
    assert all(p.describe().startswith(f"season {season.id}: still closing after") for p in heard)
