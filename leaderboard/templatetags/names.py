"""How the pages show a player: the name, or "Player <id>", and a flag drawn from the country.

The flag is the pair of Unicode regional-indicator symbols of the ISO code (FR -> U+1F1EB
U+1F1F7), which the reader's own fonts draw as the flag: no image, no request to anyone.
live.js computes the same two symbols for the rows it redraws.
"""

from __future__ import annotations

import json

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

register = template.Library()

_REGIONAL_A = 0x1F1E6


@register.filter
def flag(country: str | None) -> str:
    """The flag emoji of an ISO 3166-1 alpha-2 code; "" for none or anything else."""
    if not country or len(country) != 2 or not country.isascii() or not country.isalpha():
        return ""
    return "".join(chr(_REGIONAL_A + ord(letter) - ord("A")) for letter in country.upper())


@register.filter
def flag_span(country: str | None) -> SafeString | str:
    """The flag before a player's name, labelled with the code for readers that do not draw
    it (followed by a space); "" for a player without a country."""
    if not country:
        return ""
    return format_html(
        '<span class="flag" role="img" aria-label="{0}" title="{0}">{1}</span> ',
        country,
        flag(country),
    )


@register.filter
def column_values(tiebreakers: object) -> list[object]:
    """An entry's tie-break values in the board's column order. Not ``tiebreakers.values`` in a
    template: a column a studio named ``values`` (or ``items``, ``keys``) is looked up as a key
    first, and the page failed on the integer it found."""
    return list(tiebreakers.values()) if isinstance(tiebreakers, dict) else []


@register.filter
def metadata_text(metadata: object) -> str:
    """An entry's metadata as one line: ``key: value`` pairs joined by " · " (a nested value
    as compact JSON); "" for none. live.js writes the same text."""
    if not isinstance(metadata, dict):
        return ""
    return " · ".join(
        f"{key}: {value if isinstance(value, str) else _compact(value)}"
        for key, value in metadata.items()
    )


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@register.filter
def player_label(entry: object) -> str:
    """An entry's display name, or "Player <id>" when the player has none to show."""
    name = getattr(entry, "display_name", None)
    return name if name else f"Player {getattr(entry, 'player_id', '')}"


@register.filter
def entry_columns(board: object) -> int:
    """How many columns an entries table of ``board`` has: rank, player, the tier on a league
    board, points, one per tie-break column, the attempts on a board with max-attempts, and
    details where the board keeps metadata."""
    tiebreaks = getattr(board, "tiebreaks", ())
    return (
        3
        + len(tiebreaks)
        + (1 if getattr(board, "keeps_metadata", False) else 0)
        + (1 if getattr(board, "tiers", ()) else 0)
        + (1 if getattr(board, "max_attempts", None) else 0)
    )
