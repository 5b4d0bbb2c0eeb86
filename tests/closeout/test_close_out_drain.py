"""Close-out waits for the consumer to drain the results queued in Kafka (real Kafka, PG, Redis).

A result achieved before the season's end may still sit in the topic when the season switches
to closing: it must still count, and the final standings must wait for it.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from closeout.models import FinalStanding, RewardGrant
from closeout.services import CloseOutcome, reward_tier_create, season_close
from ingestion.consumer import MatchResultConsumer
from leaderboard import keys
from seasons.models import Season, SeasonStatus
from seasons.services import season_status_transition, season_statuses_sync
from tests.factories import MatchResultFactory, SeasonFactory
from tests.ingestion.ingest_helpers import (
    Result,
    board,
    committed_offsets,
    consumer_options,
    end_offsets,
    publish_results,
    read_topic,
)

pytestmark = pytest.mark.django_db(transaction=True)

NOW = datetime.now(UTC).replace(microsecond=0)
START = NOW - timedelta(days=2)
END = NOW - timedelta(minutes=1)  # over: the status sync switches it to closing


@pytest.fixture
def drain(settings, kafka_topic_factory):
    """The topic, its dead-letter topic, and consumer options of the group close-out checks."""
    topic = kafka_topic_factory("close-drain", partitions=2)
    dlq = kafka_topic_factory("close-drain-dlq")
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
    totals = MatchResultConsumer(options).run(until=lambda t: t.records >= records, max_seconds=90)
    assert totals.records == records, totals


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

    # The command says the same and exits non-zero; a rerun waits on the same recorded offsets,
    # not on what arrived since.
    straggler = result(season, 4, 60, END - timedelta(minutes=1))
    publish_results(topic, [straggler])
    with pytest.raises(CommandError, match=r"NOT finalized.*lagging: partition"):
        call_command(
            "close_season", "--season", str(season.id), "--grace-seconds", "0", stdout=StringIO()
        )
    assert Season.objects.get(id=season.id).drain_end_offsets == recorded
    assert (FinalStanding.objects.count(), RewardGrant.objects.count()) == (0, 0)

    # The consumer drains the topic while the season is closing: the results achieved before
    # the end count, on the boards and in PostgreSQL; the one after the end is dead-lettered.
    consume_all(options, records=len(queued) + 2)
    assert committed_offsets(topic, options.group_id) == end_offsets(topic)
    on_board = board(board_redis, keys.season_board(season_id=season.id))
    assert sorted(on_board) == [1, 2, 3, 4]
    [letter] = read_topic(dlq, count=1)
    assert dict(letter.headers)["dlq.code"] == b"outside_season"

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
