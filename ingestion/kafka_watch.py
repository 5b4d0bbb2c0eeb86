"""Say when Kafka has gone away from a running consumer, and when it is back.

An unreachable broker shows in the poll loop only as empty polls (kafka-python reconnects inside
``poll()``). The loop tells the watch, after each poll, whether Kafka answered: records came,
or the connection to the group coordinator is open (``kafka_adapter``). That connection is also
down for a moment while the consumer joins its group, hence the grace period before saying
anything.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

logger = logging.getLogger(__name__)

# How long the group coordinator must stay unreachable before the consumer says Kafka is gone.
KAFKA_LOST_GRACE = 3.0


class KafkaWatch:
    def __init__(
        self, *, group_id: str, bootstrap_servers: Sequence[str], grace: float = KAFKA_LOST_GRACE
    ) -> None:
        self._group_id = group_id
        self._bootstrap_servers = tuple(bootstrap_servers)
        self._grace = grace
        self._lost_at: float | None = None
        self._lost_logged = False

    @property
    def lost(self) -> bool:
        """Kafka has been unreachable for longer than the grace period (and was reported)."""
        return self._lost_logged

    def observe(self, *, reachable: bool, now: float) -> None:
        """Record one poll's verdict; ``now`` is ``time.monotonic()``."""
        if reachable:
            if self._lost_logged and self._lost_at is not None:
                logger.info("Kafka is back after %.1fs", now - self._lost_at)
            self._lost_at = None
            self._lost_logged = False
            return
        if self._lost_at is None:
            self._lost_at = now
        elif not self._lost_logged and now - self._lost_at >= self._grace:
            self._lost_logged = True
            logger.warning(
                "waiting for Kafka: the group coordinator of %s at %s is unreachable; "
                "polling again until it answers (nothing is committed meanwhile)",
                self._group_id,
                ",".join(self._bootstrap_servers),
            )
