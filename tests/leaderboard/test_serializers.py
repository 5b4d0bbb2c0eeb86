"""The output serializers' direct dicts equal what DRF's declared fields produce."""

from __future__ import annotations

from rest_framework import serializers

from leaderboard.selectors.rankings import PlayerStanding, RankingEntry
from leaderboard.serializers import PlayerStandingSerializer, RankingEntrySerializer


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
