"""The batch handler of the player-profiles topic: decode, dead-letter the bad, upsert the rest.

One polled batch of profiles (contract 0.3) becomes one ``player_profiles_upsert`` statement;
the profiles it cannot apply go to the profiles' dead-letter topic with their original bytes and
reason (the headers of the match-result dead letters, ingestion/dead_letters.py). Offsets are
committed by the consumer after it returns, as for match results, and exactly once is simple
here: the upsert applies a profile only where it is later than the stored one, so a redelivery
changes nothing (docs/ingestion.md, "Player profiles").
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from players.schema import (
    UNEXPECTED,
    ProfileRejected,
    ProfileUpdate,
    profile_check_not_future,
    profile_decode,
)
from players.services import player_profiles_upsert

from ..dead_letters import DeadLetterSink
from ..records import DeadLetter, Record
from ..retrying import Retrying, run_once
from ..stats import BatchOutcome
from .checks import latest_achieved_at

logger = logging.getLogger(__name__)


def player_profiles_ingest(
    *,
    records: Sequence[Record],
    dead_letters: DeadLetterSink,
    retrying: Retrying = run_once,
) -> BatchOutcome:
    """Handle one polled batch of profiles; when it returns, offsets may be committed."""
    updates: list[ProfileUpdate] = []
    letters: list[DeadLetter] = []
    not_after = latest_achieved_at()
    for record in records:
        try:
            update = profile_decode(record.value)
            profile_check_not_future(update, not_after=not_after)
            updates.append(update)
        except ProfileRejected as exc:
            letters.append(DeadLetter(record, exc.code, exc.reason))
        except Exception as exc:
            # One message must never stop the consumer: set aside, the bug to the log.
            logger.exception("unexpected error validating profile at offset %d", record.offset)
            letters.append(DeadLetter(record, UNEXPECTED, f"{type(exc).__name__}: {exc}"))
    if updates:
        # The name cache is written when the upsert commits (players.signals): a Redis that
        # fails there makes the whole step run again, harmlessly.
        retrying(
            "PostgreSQL and Redis (player profiles)",
            lambda: player_profiles_upsert(profiles=updates),
        )
    if letters:
        retrying("Kafka", lambda: dead_letters.publish(letters=letters))
    return BatchOutcome(
        records=0,
        applied=0,
        duplicates=0,
        dead_letters=0,
        not_counted=0,
        profiles=len(records),
        profiles_dead_letters=len(letters),
    )
