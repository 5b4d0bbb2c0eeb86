"""Reads of player profiles."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from .models import PlayerProfile


def player_profile_get(*, player_id: int) -> PlayerProfile | None:
    return PlayerProfile.objects.filter(player_id=player_id).first()


def player_profiles_get(*, player_ids: Iterable[int]) -> dict[int, PlayerProfile]:
    ids = list(set(player_ids))
    return {p.player_id: p for p in PlayerProfile.objects.filter(player_id__in=ids)}


def player_profiles_iter(*, chunk_size: int = 10_000) -> Iterator[list[PlayerProfile]]:
    """Every profile in player-id order, ``chunk_size`` at a time (keyset pagination: no
    OFFSET, no long transaction)."""
    after = 0
    while True:
        chunk = list(
            PlayerProfile.objects.filter(player_id__gt=after)
            .only("player_id", "display_name", "country", "hidden", "revision")
            .order_by("player_id")[:chunk_size]
        )
        if not chunk:
            return
        yield chunk
        after = chunk[-1].player_id
