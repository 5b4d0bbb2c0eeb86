"""Profile writes against the real PostgreSQL and Redis: the latest updatedAt wins whatever the
delivery order, hide and unhide, and the name cache that follows every write."""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from leaderboard import keys
from leaderboard.player_names import (
    PlayerName,
    player_names_get,
    player_names_recover,
)
from players.models import PlayerProfile
from players.schema import ProfileUpdate
from players.services import player_profile_hide, player_profile_unhide, player_profiles_upsert

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2026, 12, 1, 10, tzinfo=UTC)


def _profile(player_id=42, name="Alice", country="FR", avatar=None, at=T0, full=True):
    return ProfileUpdate(player_id, name, country, avatar, at, full)


def _stored(player_id=42) -> tuple:
    p = PlayerProfile.objects.get(player_id=player_id)
    return (p.display_name, p.country, p.avatar_url, p.profile_updated_at)


def test_the_upsert_inserts_then_applies_only_later_profiles():
    assert player_profiles_upsert(profiles=[_profile()]) == 1
    assert player_profiles_upsert(profiles=[_profile()]) == 0  # a redelivery
    older = _profile(name="Old", country="DE", at=T0 - timedelta(hours=1))
    assert player_profiles_upsert(profiles=[older]) == 0
    assert _stored() == ("Alice", "FR", None, T0)
    newer = _profile(
        name="Alicia", country=None, avatar="https://x.example/a.png", at=T0 + timedelta(1)
    )
    assert player_profiles_upsert(profiles=[newer]) == 1
    assert _stored() == ("Alicia", None, "https://x.example/a.png", T0 + timedelta(1))


def test_every_delivery_order_ends_with_the_same_profile():
    updates = [
        _profile(name="A1", country="FR", at=T0),
        _profile(name="A2", country="DE", at=T0 + timedelta(minutes=1)),
        # A match result's displayName: the name only, later than both profiles.
        _profile(name="R3", country=None, at=T0 + timedelta(minutes=2), full=False),
        _profile(name="A0", country="ES", at=T0 - timedelta(minutes=1)),
        # An exact tie with A2: the greater value wins, whatever came first.
        _profile(name="A2b", country="IT", at=T0 + timedelta(minutes=1)),
    ]
    outcomes = set()
    for order in itertools.permutations(updates):
        PlayerProfile.objects.all().delete()
        # One at a time (separate statements) and all at once (merged in one statement).
        for update in order:
            player_profiles_upsert(profiles=[update])
        one_by_one = _stored()
        PlayerProfile.objects.all().delete()
        player_profiles_upsert(profiles=list(order))
        assert _stored() == one_by_one
        outcomes.add(one_by_one)
    # The name of the latest update (the result's), country of the latest full profile.
    assert outcomes == {("R3", "IT", None, T0 + timedelta(minutes=2))}


def test_a_batch_is_one_statement():
    updates = [_profile(player_id=n, name=f"P{n}") for n in range(1, 501)]
    random.shuffle(updates)
    with CaptureQueriesContext(connection) as queries:
        assert player_profiles_upsert(profiles=updates) == 500
    writes = [q["sql"] for q in queries.captured_queries if "player_profiles" in q["sql"]]
    # The upsert, then the name cache reading the rows back once it committed.
    assert [sql.split()[0] for sql in writes] == ["INSERT", "SELECT"]
    assert PlayerProfile.objects.count() == 500
    assert player_names_get(player_ids=[1, 500])[500] == PlayerName("P500", "FR")


def test_hide_nulls_the_name_at_once_and_it_stays_hidden_through_updates():
    staff = get_user_model().objects.create_user("mod", is_staff=True)
    player_profiles_upsert(profiles=[_profile()])
    assert player_names_get(player_ids=[42]) == {42: PlayerName("Alice", "FR")}

    assert player_profile_hide(player_id=42, by=staff)
    # Written through when the hide commits: no wait at all.
    assert player_names_get(player_ids=[42]) == {42: PlayerName(None, "FR")}
    row = PlayerProfile.objects.get(player_id=42)
    assert (row.hidden, row.hidden_by_id) == (True, staff.id)
    assert row.hidden_at is not None

    player_profiles_upsert(profiles=[_profile(name="Again", at=T0 + timedelta(1))])
    row.refresh_from_db()
    assert (row.hidden, row.display_name) == (True, "Again")
    assert player_names_get(player_ids=[42]) == {42: PlayerName(None, "FR")}

    assert player_profile_unhide(player_id=42)
    assert player_names_get(player_ids=[42]) == {42: PlayerName("Again", "FR")}
    assert not player_profile_hide(player_id=999)


def test_an_unhide_undone_after_its_cache_write_leaves_the_name_hidden_for_good(board_redis):
    """Redis applied the unhide's cache write but the writer saw an error (a reply lost): the
    unhide was undone in PostgreSQL, and the cache held the undone revision; the next change of
    the row reached that same revision, which the cache refused, and a hidden name showed."""
    from players.signals import profiles_changed

    player_profiles_upsert(profiles=[_profile()])
    player_profile_hide(player_id=42)
    failures = [TimeoutError("Timeout reading from socket")]

    def reply_lost(sender, **kwargs):
        if failures:
            raise failures.pop()

    profiles_changed.connect(reply_lost)  # after the cache's receiver: it wrote, then this
    try:
        with pytest.raises(TimeoutError):
            player_profile_unhide(player_id=42)
    finally:
        profiles_changed.disconnect(reply_lost)
    assert PlayerProfile.objects.get(player_id=42).hidden
    assert player_names_get(player_ids=[42]) == {42: PlayerName(None, "FR")}
    player_profiles_upsert(profiles=[_profile(name="Later", at=T0 + timedelta(1))])
    assert player_names_get(player_ids=[42]) == {42: PlayerName(None, "FR")}


def test_an_older_cache_write_never_brings_a_hidden_name_back(board_redis):
    from leaderboard.player_names import _write

    player_profiles_upsert(profiles=[_profile()])
    before_hide = PlayerProfile.objects.get(player_id=42)  # what a slow writer read
    player_profile_hide(player_id=42)
    _write([before_hide])  # lands after the hide's write-through
    assert player_names_get(player_ids=[42]) == {42: PlayerName(None, "FR")}


def test_the_cache_is_rebuilt_from_postgresql_when_redis_lost_it(board_redis):
    player_profiles_upsert(profiles=[_profile(player_id=n, name=f"P{n}") for n in (1, 150, 9000)])
    player_profile_hide(player_id=150)
    assert player_names_recover() is not None  # the first look: no intact key yet
    assert player_names_recover() is None  # whole: nothing to do
    for key in board_redis.scan_iter(match=f"{keys.prefix_pattern()[:-1]}pn*"):
        board_redis.delete(key)
    assert player_names_get(player_ids=[1])[1] == PlayerName(None, None)
    assert player_names_recover() == 3
    assert player_names_get(player_ids=[1, 150, 9000, 5]) == {
        1: PlayerName("P1", "FR"),
        150: PlayerName(None, "FR"),
        9000: PlayerName("P9000", "FR"),
        5: PlayerName(None, None),
    }


def test_names_of_players_spread_over_many_buckets_come_back_in_one_read(board_redis):
    # A cohort's or a friends list's players: each in a bucket of its own, some without a name,
    # one listed twice; one round trip on a single Redis (a script), a pipeline on a cluster.
    named = [7, 150, 151, 9_999, 10_000, 123_456_789]
    player_profiles_upsert(
        profiles=[_profile(player_id=n, name=f"P{n}", country="SE") for n in named]
    )
    asked = [151, 42, 7, 9_999, 150, 151, 10_000, 5_000_000, 123_456_789]
    names = player_names_get(player_ids=asked)
    assert names == {
        n: PlayerName(f"P{n}", "SE") if n in named else PlayerName(None, None) for n in asked
    }
    assert player_names_get(player_ids=[]) == {}
    # One bucket, and a few (pipelined): the same answers.
    assert player_names_get(player_ids=[151, 150]) == {151: names[151], 150: names[150]}
    assert player_names_get(player_ids=[7, 150, 42]) == {n: names[n] for n in (7, 150, 42)}
