"""The output serializers' direct dicts equal what DRF's declared fields produce."""

from __future__ import annotations

from rest_framework import serializers

from leaderboard.selectors.rankings import PlayerStanding, RankingEntry
from leaderboard.serializers import PlayerStandingSerializer, RankingEntrySerializer


def declared(serializer: serializers.Serializer, instance: object) -> dict:
    return dict(serializers.Serializer.to_representation(serializer, instance))


def test_ranking_entry_matches_its_declared_fields():
    entry = RankingEntry(rank=3456789, player_id=42, points=1518)
    serializer = RankingEntrySerializer()
    assert serializer.to_representation(entry) == declared(serializer, entry)
    assert RankingEntrySerializer([entry], many=True).data == [
        {"rank": 3456789, "playerId": 42, "points": 1518}
    ]


def test_player_standing_matches_its_declared_fields():
    for to_next in (None, 7):
        standing = PlayerStanding(
            entry=RankingEntry(rank=2, player_id=42, points=1518),
            total=10,
            percentile=90.0,
            points_to_next_rank=to_next,
        )
        serializer = PlayerStandingSerializer()
        assert serializer.to_representation(standing) == declared(serializer, standing)
