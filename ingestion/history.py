"""The last hour of ingestion, for the staff dashboard's charts.

The consumers already publish their counters every stats interval (``ingestion.stats``); the
same round trip appends one sample per consumer to a single Redis sorted set scored by time and
trims what is older than an hour. That is the least invasive history: no new process, no new
periodic task, and it stops growing by itself (one hour at one sample per consumer per
interval: 360 samples per consumer at the default 10 s). Prometheus keeps the long history;
this one only has to draw the last hour without it.

The dashboard reads it back in fixed buckets (``ingest_history_get``): per bucket the applied
rate summed over consumers (each consumer's mean), the lag summed over consumers (each one's
last), and the dead letters written during the bucket (the growth of each consumer's running
total; a consumer that restarted, or started within the hour, starts again from 0).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from leaderboard import keys
from leaderboard.redis import get_board_redis

HISTORY_SECONDS = 3600


def history_sample_add(
    pipe: Any,
    *,
    consumer_id: str,
    at: int,
    applied_per_second: float,
    lag: int | None,
    dead_letters: int,
) -> None:
    """Queue on ``pipe`` one consumer's sample at unix time ``at``, and drop the samples older
    than an hour (the caller executes the pipeline)."""
    key = keys.ingest_history()
    sample = json.dumps(
        {"c": consumer_id, "t": at, "r": applied_per_second, "l": lag, "d": dead_letters},
        separators=(",", ":"),
    )
    pipe.zadd(key, {sample: at})
    pipe.zremrangebyscore(key, "-inf", at - HISTORY_SECONDS)
    pipe.expire(key, HISTORY_SECONDS + 60)


@dataclass(frozen=True, slots=True)
class IngestPoint:
    at: int  # unix time of the bucket's start
    applied_per_second: float | None  # None: no consumer reported in the bucket
    lag: int | None  # None: no consumer knew its lag in the bucket
    dead_letters: int


def ingest_history_get(
    *, now: float, bucket_seconds: int = 60, span_seconds: int = HISTORY_SECONDS
) -> list[IngestPoint]:
    """The last ``span_seconds`` in buckets of ``bucket_seconds``, oldest first, every bucket
    present (the charts' x axis is time, not samples)."""
    end = math.floor(now / bucket_seconds) * bucket_seconds + bucket_seconds
    start = end - span_seconds
    # One bucket earlier too: the dead letters of the first bucket need the total before it.
    raw: list[bytes] = get_board_redis().zrangebyscore(  # type: ignore[assignment]
        keys.ingest_history(), start - bucket_seconds, end
    )
    samples = []
    for item in raw:
        try:
            samples.append(json.loads(item))
        except ValueError:
            continue
    samples.sort(key=lambda s: (s["c"], s["t"]))
    count = span_seconds // bucket_seconds
    rates: list[dict[str, list[float]]] = [{} for _ in range(count)]
    lags: list[dict[str, int]] = [{} for _ in range(count)]
    letters = [0] * count
    previous: dict[str, int] = {}
    for sample in samples:
        consumer, at, total = str(sample["c"]), int(sample["t"]), int(sample["d"] or 0)
        last = previous.get(consumer)
        previous[consumer] = total
        index = (at - start) // bucket_seconds
        if not 0 <= index < count:
            continue
        rates[index].setdefault(consumer, []).append(float(sample["r"] or 0))
        if sample.get("l") is not None:
            lags[index][consumer] = int(sample["l"])
        if last is None:
            # A consumer's first sample: it started within the hour (its total is all new),
            # unless it sits in the first bucket, where the samples before it were trimmed.
            letters[index] += total if index > 0 else 0
        else:
            letters[index] += total - last if total >= last else total
    return [
        IngestPoint(
            at=start + i * bucket_seconds,
            applied_per_second=(
                round(sum(sum(v) / len(v) for v in rates[i].values()), 1) if rates[i] else None
            ),
            lag=sum(lags[i].values()) if lags[i] else None,
            dead_letters=letters[i],
        )
        for i in range(count)
    ]
