"""A dead letter's reason header stays small whatever the reason quotes (a pure unit)."""

from __future__ import annotations

from ingestion.dead_letters import REASON_MAX_BYTES, dead_letter_headers, dead_letter_reason
from ingestion.records import ConsumedRecord, DeadLetter


def _letter(reason: str) -> DeadLetter:
    return DeadLetter(ConsumedRecord(partition=0, offset=7, key=None, value=b"{}"), "x", reason)


def _reason_header(letter: DeadLetter) -> bytes:
    return dict(dead_letter_headers(letter=letter, topic="t"))["dlq.reason"]


def test_a_short_reason_is_kept_whole() -> None:
    letter = _letter("points must be at least 0, got -1")
    assert _reason_header(letter) == b"points must be at least 0, got -1"


def test_a_long_reason_is_cut_to_the_header_limit_whatever_its_characters() -> None:
    # Multi-byte characters, lone surrogates (escaped to six bytes each) and a cut through a
    # four-byte character.
    for reason in ("a" * 2_000_000, "é" * 700_000, "\ud800" * 500_000, "x" + "🎮" * 400):
        letter = _letter(reason)
        header = _reason_header(letter)
        assert len(header) <= REASON_MAX_BYTES
        assert header == dead_letter_reason(letter=letter).encode("utf-8", "backslashreplace")
        assert header.startswith(reason[:1].encode("utf-8", "backslashreplace"))
        assert header.endswith(b" bytes)")
