from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from closeout.services import schedule_advance, schedule_create
from ingestion.schema import message_check_board, message_decode
from ingestion.simulation import MatchGenerator, SimulationConfig
from leaderboard.models import Board
from tests.factories import SeasonFactory
from tests.helpers import subprocess_database_url, wait_until

from .topic_reader import topic_read, topic_size

pytestmark = pytest.mark.django_db


@pytest.fixture
def season():
    now = datetime.now(tz=UTC)
    return SeasonFactory(id=21, starts_at=now - timedelta(days=1), ends_at=now + timedelta(days=30))


def simulate(topic: str, *args: str) -> str:
    out = StringIO()
    call_command(
        "simulate_matches", "--season", "21", "--topic", topic, "--no-progress", *args, stdout=out
    )
    return out.getvalue()


def test_a_short_run_publishes_about_rate_times_duration_valid_results(
    season, kafka_topic_factory, kafka_bootstrap
) -> None:
    topic = kafka_topic_factory(prefix="simulate", partitions=2)
    output = simulate(topic, "--players", "500", "--rate", "200", "--duration", "2")
    assert "sent " in output

    size = topic_size(topic, kafka_bootstrap)
    # 400 at the target rate; never above it (pacing is to the message), and below it only by
    # what a starved process on a loaded machine could not catch up before the deadline.
    assert 300 <= size <= 410, size
    records = topic_read(topic, kafka_bootstrap, count=size)
    assert len(records) == size
    messages = [message_decode(record.value) for record in records]
    for record, message in zip(records, messages, strict=True):
        board = Board.objects.get(season=season, slug=message.board)
        message_check_board(message, season, board)  # raises if the consumer would dead-letter it
        assert record.key == str(message.player_id).encode()
    # No duplicates were asked for.
    assert len({(m.match_id, m.player_id) for m in messages}) == size
    # Matches have several players; equal points happen.
    assert max(Counter(m.match_id for m in messages).values()) >= 2
    assert max(Counter(m.points for m in messages).values()) >= 2


def test_duplicates_are_resent_when_asked(season, kafka_topic_factory, kafka_bootstrap) -> None:
    topic = kafka_topic_factory(prefix="simulate")
    output = simulate(
        topic,
        "--players", "100", "--rate", "200", "--duration", "2",
        "--duplicates", "0.3", "--late-delay", "0.5", "--seed", "7",
    )  # fmt: skip
    size = topic_size(topic, kafka_bootstrap)
    records = topic_read(topic, kafka_bootstrap, count=size)
    values = Counter(record.value for record in records)
    duplicated = sum(count - 1 for count in values.values())
    # About 30% of ~400 results are re-sent, immediately or half a second later.
    assert 60 <= duplicated <= 180, (duplicated, output)
    assert "late duplicates" in output
    retried = [json.loads(v) for v, count in values.items() if count > 1]
    assert all(item["seasonId"] == 21 for item in retried)


def test_unknown_season_is_a_clear_error(kafka_topic_factory) -> None:
    with pytest.raises(CommandError, match="season 21 does not exist"):
        simulate("unused", "--duration", "1")


def test_points_stay_within_the_codec_and_activity_is_skewed() -> None:
    now = datetime.now(tz=UTC)
    config = SimulationConfig(
        season_id=1,
        season_starts_at=now - timedelta(days=1),
        season_ends_at=now + timedelta(days=1),
        max_points=5_000,
        players=10_000,
        points_mean=4_000,
        seed=3,
    )
    generator = MatchGenerator(config)
    results = [r for _ in range(3_000) for r in generator.match(now)]
    assert all(0 <= r.points <= 5_000 and r.points % 10 in (0, 5_000 % 10) for r in results)
    assert any(r.points == 5_000 for r in results)  # clipped at the codec's maximum
    plays = Counter(r.player_id for r in results)
    assert all(1 <= player <= 10_000 for player in plays)
    # The busiest fifth of all players play most matches (uniform picks would give ~35%).
    busiest = sorted(plays.values(), reverse=True)[: 10_000 // 5]
    assert sum(busiest) > 0.7 * len(results)


def run_until_interrupted(target: list[str], *, topic: str, bootstrap: list[str]) -> bytes:
    """An endless simulate_matches process, interrupted (SIGINT) once 20 messages are out; its
    output. It must exit 0."""
    env = {**os.environ, "DATABASE_URL": subprocess_database_url()}
    command = [sys.executable, "manage.py", "simulate_matches", *target, "--topic", topic]
    command += ["--rate", "100", "--duration", "0", "--players", "100", "--no-progress"]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: topic_size(topic, bootstrap) >= 20, timeout=30, every=0.2)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    return out


@pytest.mark.django_db(transaction=True)
def test_sigint_stops_an_endless_run_cleanly(season, kafka_topic_factory, kafka_bootstrap) -> None:
    topic = kafka_topic_factory(prefix="simulate")
    out = run_until_interrupted(["--season", "21"], topic=topic, bootstrap=kafka_bootstrap)
    assert b"stopped early" in out
    sent = int(out.split(b"sent ", 1)[1].split(b" ", 1)[0])
    # Everything it says it sent was flushed to Kafka before it exited.
    assert topic_size(topic, kafka_bootstrap) == sent


def test_names_gives_players_names_on_results_and_profiles(
    season, settings, kafka_topic_factory, kafka_bootstrap
) -> None:
    from players.schema import display_name_validate, profile_decode

    topic = kafka_topic_factory(prefix="simulate", partitions=1)
    settings.KAFKA_PLAYER_PROFILES_TOPIC = kafka_topic_factory(prefix="simulate-profiles")
    simulate(topic, "--players", "50", "--rate", "300", "--duration", "2", "--names", "--seed", "3")
    sent = topic_size(topic, kafka_bootstrap)
    results = [
        message_decode(r.value)
        for r in topic_read(topic, kafka_bootstrap, until=lambda r: len(r) >= sent)
    ]
    named = [m for m in results if m.display_name is not None]
    assert named
    assert len(named) < len(results)  # a share of them
    for message in named:
        assert display_name_validate(message.display_name) == MatchGenerator.display_name(
            message.player_id
        )
    size = topic_size(settings.KAFKA_PLAYER_PROFILES_TOPIC, kafka_bootstrap)
    assert size > 0
    records = topic_read(
        settings.KAFKA_PLAYER_PROFILES_TOPIC, kafka_bootstrap, until=lambda r: len(r) >= size
    )
    for record in records:
        profile = profile_decode(record.value)  # the consumer takes it
        assert record.key == str(profile.player_id).encode()
        assert profile.country == MatchGenerator.country(profile.player_id)


def test_every_board_of_the_season_gets_results_it_takes_tie_break_columns_included(
    season, kafka_topic_factory, kafka_bootstrap
) -> None:
    from leaderboard.models import TiebreakColumn
    from tests.factories import board_factory

    columns = (TiebreakColumn("kills", "desc"), TiebreakColumn("deaths", "asc"))
    board_factory(season, "arena", tiebreaks=columns)
    topic = kafka_topic_factory(prefix="simulate")
    simulate(topic, "--boards", "*", "--players", "50", "--rate", "100", "--duration", "1")
    size = topic_size(topic, kafka_bootstrap)
    messages = [message_decode(r.value) for r in topic_read(topic, kafka_bootstrap, count=size)]
    arena = [m for m in messages if m.board == "arena"]
    assert arena, "no result for the arena board"
    for message in messages:
        board = Board.objects.get(season=season, slug=message.board)
        message_check_board(message, season, board)  # raises if the consumer would dead-letter it
    assert all(set(m.tiebreakers or ()) == {"kills", "deaths"} for m in arena)
    assert all(m.tiebreakers is None for m in messages if m.board == "main")


@pytest.mark.django_db(transaction=True)
def test_schedule_plays_the_schedules_current_season(kafka_topic_factory, kafka_bootstrap) -> None:
    now = datetime.now(tz=UTC)
    SeasonFactory(  # the template
        id=22, starts_at=now - timedelta(days=3), ends_at=now - timedelta(days=2)
    )
    schedule = schedule_create(
        slug="sim-cup",
        name="Sim cup",
        cron="0 * * * *",
        template_season_id=22,
        lead_minutes=0,
        starts_from=now - timedelta(hours=2),
    )
    [current] = schedule_advance(schedule_id=schedule.id).created
    topic = kafka_topic_factory(prefix="simulate-schedule")
    out = run_until_interrupted(["--schedule", "sim-cup"], topic=topic, bootstrap=kafka_bootstrap)
    assert f"season {current}: sent ".encode() in out
    records = topic_read(topic, kafka_bootstrap, count=topic_size(topic, kafka_bootstrap))
    assert {message_decode(r.value).season_id for r in records} == {current}


def test_an_unknown_schedule_is_a_clear_error(kafka_topic_factory) -> None:
    with pytest.raises(CommandError, match="schedule 'nope' does not exist"):
        call_command(
            "simulate_matches",
            "--schedule",
            "nope",
            "--topic",
            kafka_topic_factory(prefix="simulate"),
            "--no-progress",
        )


def test_a_tournament_board_is_played_by_the_players_seated_within_their_attempts(
    season, kafka_topic_factory, kafka_bootstrap
) -> None:
    from leaderboard.models import Participant
    from tests.factories import board_factory

    cup = board_factory(season, "cup", join_required=True, max_size=6, max_attempts=2)
    topic = kafka_topic_factory(prefix="simulate")
    output = simulate(topic, "--boards", "*", "--players", "40", "--rate", "300", "--duration", "1")
    assert "board 'cup': 6 simulated players seated, 8 refused (board_full)" in output
    seated = set(Participant.objects.filter(board=cup).values_list("player_id", flat=True))
    assert len(seated) == 6
    size = topic_size(topic, kafka_bootstrap)
    messages = [message_decode(r.value) for r in topic_read(topic, kafka_bootstrap, count=size)]
    on_cup = Counter(m.player_id for m in messages if m.board == "cup")
    assert on_cup, "no result for the tournament board"
    assert set(on_cup) <= seated
    assert max(on_cup.values()) <= 2
    # The other boards take everyone.
    assert {m.player_id for m in messages if m.board == "main"} - seated
