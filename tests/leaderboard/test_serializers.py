"""The output serializers' direct dicts equal what DRF's declared fields produce."""

from __future__ import annotations

from rest_framework import serializers

from leaderboard.selectors.cohorts import CohortEntry, CohortStanding
from leaderboard.selectors.rankings import PlayerStanding, RankingEntry
from leaderboard.serializers import (
    CohortEntrySerializer,
    CohortSerializer,
    PlayerStandingSerializer,
    RankingEntrySerializer,
)


def declared(serializer: serializers.Serializer, instance: object) -> dict:
    return dict(serializers.Serializer.to_representation(serializer, instance))


def test_ranking_entry_matches_its_declared_fields():
    entry = RankingEntry(rank=3456789, player_id=42, points=1518)
    named = RankingEntry(rank=1, player_id=7, points=9, display_name="Zoë", country="FR")
    serializer = RankingEntrySerializer()
    assert serializer.to_representation(entry) == declared(serializer, entry)
    assert serializer.to_representation(named) == declared(serializer, named)
    assert RankingEntrySerializer([entry, named], many=True).data == [
        {"rank": 3456789, "playerId": 42, "points": 1518, "displayName": None, "country": None},
        {"rank": 1, "playerId": 7, "points": 9, "displayName": "Zoë", "country": "FR"},
    ]


def test_player_standing_matches_its_declared_fields():
    for to_next in (None, 7):
        standing = PlayerStanding(
            entry=RankingEntry(rank=2, player_id=42, points=1518, display_name="A", country="DE"),
            total=10,
            percentile=90.0,
            points_to_next_rank=to_next,
        )
        serializer = PlayerStandingSerializer()
        assert serializer.to_representation(standing) == declared(serializer, standing)


def test_metadata_is_there_on_boards_that_keep_it_and_left_out_elsewhere():
    kept = RankingEntry(rank=1, player_id=7, points=9, metadata={"car": "Aster GT"})
    kept_none = RankingEntry(rank=2, player_id=8, points=8, metadata=None)
    plain = RankingEntry(rank=3, player_id=9, points=7)
    serializer = RankingEntrySerializer()
    for entry in (kept, kept_none, plain):
        assert serializer.to_representation(entry) == declared(serializer, entry)
    assert serializer.to_representation(kept)["metadata"] == {"car": "Aster GT"}
    assert serializer.to_representation(kept_none)["metadata"] is None
    assert "metadata" not in serializer.to_representation(plain)
    standing = PlayerStanding(entry=kept, total=3, percentile=100.0, points_to_next_rank=None)
    standing_serializer = PlayerStandingSerializer()
    assert standing_serializer.to_representation(standing) == declared(
        standing_serializer, standing
    )
    assert standing_serializer.to_representation(standing)["metadata"] == {"car": "Aster GT"}


def test_tier_is_there_on_league_boards_and_left_out_elsewhere():
    league = RankingEntry(rank=1, player_id=7, points=9, tier="gold")
    waiting = RankingEntry(rank=2, player_id=8, points=8, tier=None)
    plain = RankingEntry(rank=3, player_id=9, points=7)
    serializer = RankingEntrySerializer()
    for entry in (league, waiting, plain):
        assert serializer.to_representation(entry) == declared(serializer, entry)
        standing = PlayerStanding(entry=entry, total=3, percentile=1.0, points_to_next_rank=None)
        standing_serializer = PlayerStandingSerializer()
        assert standing_serializer.to_representation(standing) == declared(
            standing_serializer, standing
        )
    assert serializer.to_representation(league)["tier"] == "gold"
    assert serializer.to_representation(waiting)["tier"] is None
    assert "tier" not in serializer.to_representation(plain)


def test_cohort_matches_its_declared_fields():
    entries = [
        CohortEntry(1, RankingEntry(rank=12, player_id=7, points=9, display_name="A")),
        CohortEntry(1, RankingEntry(rank=12, player_id=8, points=9, metadata={"car": "GT"})),
        CohortEntry(3, RankingEntry(rank=40, player_id=9, points=2, tiebreakers={"kills": 3})),
    ]
    standing = CohortStanding(number=4, size=50, members=3, tier=None, entries=entries)
    serializer = CohortSerializer()
    direct = serializer.to_representation(standing)
    entry = CohortEntrySerializer()
    assert direct == {
        **{k: v for k, v in declared(serializer, standing).items() if k != "entries"},
        "entries": [declared(entry, e) for e in entries],
    }
    assert [(e["rank"], e["globalRank"]) for e in direct["entries"]] == [(1, 12), (1, 12), (3, 40)]
    assert all("tier" not in e and "movement" not in e for e in direct["entries"])


def test_a_league_cohort_matches_its_declared_fields():
    entries = [
        CohortEntry(1, RankingEntry(rank=3, player_id=7, points=9, tier="gold"), "stayed"),
        CohortEntry(2, RankingEntry(rank=8, player_id=8, points=5, tier="gold"), "relegated"),
    ]
    standing = CohortStanding(number=2, size=20, members=2, tier="gold", entries=entries)
    serializer = CohortSerializer()
    direct = serializer.to_representation(standing)
    entry = CohortEntrySerializer()
    assert direct == {
        **{k: v for k, v in declared(serializer, standing).items() if k != "entries"},
        "entries": [declared(entry, e) for e in entries],
    }
    assert direct["tier"] == "gold"
    assert [(e["tier"], e["movement"]) for e in direct["entries"]] == [
        ("gold", "stayed"),
        ("gold", "relegated"),
    ]


def test_attempts_are_there_on_boards_with_max_attempts_and_left_out_elsewhere():
    tournament = RankingEntry(rank=1, player_id=7, points=9, attempts=2, tier="gold")
    none_yet = RankingEntry(rank=2, player_id=8, points=8, attempts=0)
    plain = RankingEntry(rank=3, player_id=9, points=7)
    serializer = RankingEntrySerializer()
    for entry in (tournament, none_yet, plain):
        assert serializer.to_representation(entry) == declared(serializer, entry)
        standing = PlayerStanding(entry=entry, total=3, percentile=1.0, points_to_next_rank=None)
        standing_serializer = PlayerStandingSerializer()
        assert standing_serializer.to_representation(standing) == declared(
            standing_serializer, standing
        )
    assert serializer.to_representation(tournament)["attempts"] == 2
    assert serializer.to_representation(none_yet)["attempts"] == 0
    assert "attempts" not in serializer.to_representation(plain)
    entries = [CohortEntry(1, tournament), CohortEntry(2, none_yet)]
    cohort = CohortStanding(number=1, size=5, members=2, tier=None, entries=entries)
    direct = CohortSerializer().to_representation(cohort)
    assert direct["entries"] == [declared(CohortEntrySerializer(), e) for e in entries]
    assert [e["attempts"] for e in direct["entries"]] == [2, 0]


def test_entry_named_keeps_every_other_field():
    # RankingEntry.named builds the entry by hand for speed: a field added to RankingEntry and
    # forgotten there would be dropped from every named read.
    from dataclasses import fields, replace

    entry = RankingEntry(
        rank=4,
        player_id=42,
        points=1518,
        metadata={"car": "red"},
        tiebreakers={"kills": 3},
        tier="gold",
        attempts=2,
        score=b"123",
    )
    named = entry.named("Zoë", "FR")
    expected = replace(entry, display_name="Zoë", country="FR")
    assert [getattr(named, f.name) for f in fields(RankingEntry)] == [
        getattr(expected, f.name) for f in fields(RankingEntry)
    ]


def test_json_body_is_what_drf_renders():
    # The hot endpoints render through orjson (leaderboard/apis.py _json_bytes): byte for byte
    # what DRF's JSONRenderer writes, which the ETags digest.
    import datetime
    import decimal
    import uuid

    from django.utils.translation import gettext_lazy
    from rest_framework.renderers import JSONRenderer

    from leaderboard.apis import _json_bytes

    samples = [
        [{"rank": 1, "playerId": 2**62, "displayName": 'Zoë \u2028 \u2029 "q" \n\t\x01'}],
        {"at": datetime.datetime(2026, 12, 3, 14, 58, 28, 123456, tzinfo=datetime.UTC)},
        {"day": datetime.date(2026, 12, 3), "id": uuid.UUID(int=7), "d": decimal.Decimal("1.5")},
        {"metadata": {"big": 2**70, "neg": -(2**65), "f": 0.1, "n": None, "t": True}},
        {"lazy": gettext_lazy("not found"), "tuple": (1, 2), "emoji": "🏁"},
        {"points": 2_147_483_647, "percentile": 100.0, "half": 0.5, "empty": [], "obj": {}},
    ]
    for data in samples:
        assert _json_bytes(data) == JSONRenderer().render(data), data
