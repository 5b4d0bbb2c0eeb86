"""One consumer, two topics (contract 0.3): match results and player profiles, against real
Kafka, PostgreSQL and Redis."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest

from ingestion.consumer import MatchResultConsumer
from leaderboard.models import MatchResult
from leaderboard.player_names import PlayerName, player_names_get
from players.models import PlayerProfile
from tests.helpers import make_live_season

from .ingest_helpers import committed_offsets, consumer_options, end_offsets, publish
from .topic_reader import topic_read

pytestmark = pytest.mark.django_db(transaction=True)


def _profile(player_id: int, name: object, at: datetime, **extra: object) -> tuple[bytes, bytes]:
    body = {"playerId": player_id, "displayName": name, "updatedAt": at.isoformat(), **extra}
    return str(player_id).encode(), json.dumps(body).encode()


@pytest.fixture
def topics(kafka_topic_factory):
    return {
        "results": kafka_topic_factory("ingest", partitions=2),
        "results_dlq": kafka_topic_factory("ingest-dlq"),
        "profiles": kafka_topic_factory("profiles", partitions=2),
        "profiles_dlq": kafka_topic_factory("profiles-dlq"),
    }


def test_the_consumer_reads_both_topics_and_commits_both(topics):
    season = make_live_season()
    T0 = season.starts_at + timedelta(days=1)
    now = season.starts_at + timedelta(days=29)  # the results: later than every profile
    profiles = [
        _profile(1, "Alice", T0, country="FR"),
        _profile(2, "Bob", T0 + timedelta(hours=1), country="DE"),
        # Older than Bob's above, delivered after it: never overwrites it.
        _profile(2, "Bobby-old", T0, country="ES"),
        # Dead letters, each with its reason.
        _profile(3, "x" * 40, T0),
        _profile(4, "Dan", T0, country="fr"),
        _profile(5, "Eve", T0, avatarUrl="http://insecure.example/e.png"),
        (b"6", b"not json"),
        # From the future: it would win over every real profile after it, for good.
        _profile(9, "Zed", T0 + timedelta(days=400)),
    ]
    results: list[dict[str, Any]] = [
        # A name on a result: the same update at its achievedAt (later than Alice's profile).
        {"displayName": "Alice2", "playerId": 1, "points": 10},
        # A bad name: the result counts, the name is skipped.
        {"displayName": "bad\x07name", "playerId": 7, "points": 20},
        {"playerId": 8, "points": 30},
    ]
    publish(topics["profiles"], profiles)
    publish(
        topics["results"],
        (
            (
                str(r["playerId"]).encode(),
                json.dumps(
                    {
                        "matchId": str(uuid.uuid4()),
                        "seasonId": season.id,
                        "achievedAt": now.isoformat(),
                        **r,
                    }
                ).encode(),
            )
            for r in results
        ),
    )
    options = consumer_options(
        topic=topics["results"],
        dead_letter_topic=topics["results_dlq"],
        profiles_topic=topics["profiles"],
        profiles_dead_letter_topic=topics["profiles_dlq"],
    )
    totals = MatchResultConsumer(options).run(
        until=lambda t: t.records >= len(results) and t.profiles >= len(profiles),
        max_seconds=90,
    )
    assert (totals.records, totals.applied, totals.dead_letters) == (3, 3, 0)
    assert (totals.profiles, totals.profiles_dead_letters, totals.names_skipped) == (8, 5, 1)

    stored = {p.player_id: (p.display_name, p.country) for p in PlayerProfile.objects.all()}
    assert stored == {1: ("Alice2", "FR"), 2: ("Bob", "DE")}
    assert MatchResult.objects.filter(player_id=7).exists()
    assert player_names_get(player_ids=[1, 2, 7]) == {
        1: PlayerName("Alice2", "FR"),
        2: PlayerName("Bob", "DE"),
        7: PlayerName(None, None),
    }

    letters = topic_read(topics["profiles_dlq"], count=5)
    by_key = {r.key: dict(r.headers) for r in letters}
    assert {k: h["dlq.code"] for k, h in by_key.items()} == {
        b"3": b"invalid_display_name",
        b"4": b"invalid_country",
        b"5": b"invalid_avatar_url",
        b"6": b"not_json",
        b"9": b"invalid_value",
    }
    assert all(h["dlq.source.topic"] == topics["profiles"].encode() for h in by_key.values())
    assert all(h["dlq.reason"] for h in by_key.values())
    assert {r.key: r.value for r in letters}[b"6"] == b"not json"  # the original bytes
    assert topic_read(topics["results_dlq"]) == []

    # Both topics' offsets were committed after the batch.
    for topic in ("results", "profiles"):
        ends = {p: end for p, end in end_offsets(topics[topic]).items() if end}
        committed = committed_offsets(topics[topic], options.group_id)
        assert {p: committed[p] for p in ends} == ends
