"""The staff dashboard: its history (written by the consumers' stats publisher), its
dead-letter tail, and the page itself over real Redis, Kafka and PostgreSQL."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from kafka import KafkaProducer

from ingestion.dead_letter_tail import dead_letters_latest
from ingestion.history import ingest_history_get
from ingestion.stats import ConsumerStats, consumer_stats_publish
from leaderboard.models import RebuildRun
from leaderboard_project.dashboard import SECTION_PERMISSIONS
from tests.helpers import main_board_id, make_season
from tests.leaderboard.board_fixtures import write_season_board

pytestmark = pytest.mark.django_db


def _publish(consumer: str, at: int, *, rate: float, lag: int | None, dead: int) -> None:
    consumer_stats_publish(
        stats=ConsumerStats(
            consumer_id=consumer,
            topic="t",
            group_id="g",
            applied_per_second=rate,
            records=0,
            applied=0,
            duplicates=0,
            dead_letters=dead,
            not_counted=0,
            lag=lag,
            updated_at=at,
        ),
        ttl_seconds=60,
    )


def test_history_sums_consumers_per_minute_and_counts_new_dead_letters():
    now = 1_800_000_000  # a minute boundary
    for offset, dead in ((-170, 2), (-150, 2), (-110, 5)):
        _publish("a", now + offset, rate=100.0, lag=10, dead=dead)
    _publish("b", now - 110, rate=50.0, lag=5, dead=1)
    # Older than an hour before the newest sample: trimmed on write.
    _publish("a", now - 4000, rate=1.0, lag=1, dead=0)

    points = ingest_history_get(now=now - 100, bucket_seconds=60)
    assert len(points) == 60
    by_start = {p.at: p for p in points}
    minute = now - 120  # holds a@-110 and b@-110
    assert by_start[minute].applied_per_second == 150.0
    assert by_start[minute].lag == 15
    # a went 2 -> 5; b started within the hour with 1.
    assert by_start[minute].dead_letters == 3 + 1
    assert by_start[now - 180].dead_letters == 2  # a's first sample: all of it is new
    assert by_start[now - 60 * 59].applied_per_second is None


def test_dead_letter_tail_reads_the_newest_letters_with_their_reasons(
    kafka_topic_factory, kafka_bootstrap
):
    topic = kafka_topic_factory("dash-dlq", partitions=2)
    assert dead_letters_latest(topic=topic, bootstrap_servers=kafka_bootstrap) == []
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    for i in range(30):
        producer.send(
            topic,
            key=str(i).encode(),
            value=b'{"points": -%d}' % i,
            headers=[("dlq.code", b"invalid"), ("dlq.reason", f"reason {i}".encode())],
        )
    producer.flush()
    producer.close()
    letters = dead_letters_latest(topic=topic, bootstrap_servers=kafka_bootstrap, limit=5)
    assert len(letters) == 5
    assert letters[0].reason == "reason 29"
    assert {letter.code for letter in letters} == {"invalid"}
    assert dead_letters_latest(topic="no-such-topic-dash", bootstrap_servers=kafka_bootstrap) == []


def test_dashboard_is_staff_only_and_shows_charts_boards_and_runs(client, board_redis, settings):
    settings.KAFKA_DEAD_LETTER_TOPIC = "no-such-topic-dash"
    season = make_season(name="Dash Cup", status="active")
    write_season_board(board_redis, season)
    RebuildRun.objects.create(
        season=season, board_id=main_board_id(season.id), reason="admin", members=7
    )
    _publish("c1", int(time.time()), rate=42.0, lag=3, dead=0)

    assert client.get("/admin/dashboard").status_code == 302  # to the login page
    staff = get_user_model().objects.create_user("staff", password="pw", is_staff=True)
    _grant(staff, *SECTION_PERMISSIONS.values())
    client.force_login(staff)
    assert 'href="/admin/dashboard"' in client.get("/admin/").content.decode()
    html = client.get("/admin/dashboard").content.decode()
    assert html.count('<svg class="chart"') == 3
    assert "latest 42 results/s" in html
    assert "Dash Cup" in html
    assert '<td class="num">7</td>' in html  # the board's size and the run's members
    assert "no snapshot" in html
    assert "No dead letters." in html


def _grant(user, *perms: str) -> None:
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )


def test_staff_see_only_the_sections_their_permissions_show(client, board_redis, settings):
    settings.KAFKA_DEAD_LETTER_TOPIC = "no-such-topic-dash"
    season = make_season(name="Dash Cup", status="active")
    write_season_board(board_redis, season)
    _publish("c1", int(time.time()), rate=42.0, lag=3, dead=0)
    moderator = get_user_model().objects.create_user("mod", password="pw", is_staff=True)
    _grant(moderator, "players.change_playerprofile")
    client.force_login(moderator)
    html = client.get("/admin/dashboard").content.decode()
    assert "You have no permission to view match results." in html
    assert "You have no permission to view webhook endpoints." in html
    assert "You have no permission to view seasons." in html
    assert "Dash Cup" not in html
    assert "latest 42 results/s" not in html
    assert client.get("/admin/webhooks/receiver").status_code == 403
    # One permission shows its section alone.
    _grant(moderator, "seasons.view_season")
    moderator = get_user_model().objects.get(pk=moderator.pk)  # permissions are cached
    client.force_login(moderator)
    html = client.get("/admin/dashboard").content.decode()
    assert "Dash Cup" in html
    assert "You have no permission to view match results." in html
