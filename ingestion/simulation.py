"""A load generator that behaves like a fleet of game servers (``simulate_matches``).

What makes it realistic enough to exercise the consumer:

- matches of 2 to 8 players, one message per player result, sharing the match id;
- skewed activity: a fifth of the players (the "regulars") play 80% of the matches, the rest
  are picked uniformly; player ids are scattered so regulars are not ids 1..N/5;
- points drawn from a lognormal around ``points_mean`` and rounded to ``points_step`` so equal
  points (ties) are common, clipped to 0..the season codec's maximum;
- ``achievedAt`` = now, clamped into the season's window (ticks collide too: more ties);
- duplicates, a ``duplicates`` fraction of the results: half are producer retries (the same
  bytes re-sent at once), half late duplicates (the same result re-sent ``late_delay`` seconds
  later as a new message, as a game server retrying after a timeout would).

Paced to ``rate`` messages per second (duplicates included) in small slices; a slow broker
shows as a rate below target in the summary, never as an unbounded backlog in memory.
"""

from __future__ import annotations

import math
import random
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from .producer import MatchResultProducer, match_result_key, match_result_value
from .schema import MatchResultMessage

# Pacing granularity: one slice of messages every 20 ms keeps the rate smooth at 20,000/s.
_SLICE_SECONDS = 0.02
REGULARS_SHARE = 0.2
REGULARS_ACTIVITY = 0.8


@dataclass(frozen=True, slots=True)
class SimulationConfig:
    season_id: int
    season_starts_at: datetime
    season_ends_at: datetime
    max_points: int
    players: int = 1_000_000
    rate: float = 2_000.0
    duration_seconds: float = 60.0  # 0: until stopped
    duplicates: float = 0.0
    late_delay_seconds: float = 5.0
    points_mean: int = 1_500
    points_sigma: float = 0.5
    points_step: int = 10
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.players < 1:
            raise ValueError("players must be at least 1")
        if self.rate <= 0:
            raise ValueError("rate must be positive")
        if self.duration_seconds < 0:
            raise ValueError("duration must be >= 0 (0 runs until stopped)")
        if not 0 <= self.duplicates <= 1:
            raise ValueError("duplicates is a fraction between 0 and 1")
        if self.points_step < 1 or self.points_mean < 0:
            raise ValueError("points_step must be >= 1 and points_mean >= 0")


@dataclass(slots=True)
class SimulationStats:
    messages: int = 0  # everything sent, duplicates included
    results: int = 0  # distinct results
    matches: int = 0
    retries: int = 0
    late_duplicates: int = 0
    late_dropped: int = 0  # late duplicates still waiting when the run stopped
    elapsed_seconds: float = 0.0
    stopped_early: bool = False
    points_seen: dict[int, int] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.messages / self.elapsed_seconds if self.elapsed_seconds > 0 else 0.0

    @property
    def ties(self) -> int:
        """Results whose points equal an earlier result's points (a rough measure of ties)."""
        return sum(count - 1 for count in self.points_seen.values())


class MatchGenerator:
    """Produces the results of simulated matches (pure: no I/O, seedable)."""

    def __init__(self, config: SimulationConfig) -> None:
        self.config = config
        self.random = random.Random(config.seed)  # noqa: S311 -- simulated play, not secrets
        self._regulars = max(1, int(config.players * REGULARS_SHARE))
        # An affine map mod players with a multiplier coprime to it is a permutation: it
        # scatters the regulars over the whole id range.
        self._multiplier = self._coprime_multiplier(config.players)
        self._offset = self.random.randrange(config.players)
        # Median of the lognormal at points_mean.
        self._mu = math.log(max(config.points_mean, 1))

    @staticmethod
    def _coprime_multiplier(players: int) -> int:
        candidate = 2_654_435_761 % players or 1
        while math.gcd(candidate, players) != 1:
            candidate += 1
        return candidate

    def player_id(self) -> int:
        if self.random.random() < REGULARS_ACTIVITY:
            index = self.random.randrange(self._regulars)
        else:
            index = self.random.randrange(self.config.players)
        return (index * self._multiplier + self._offset) % self.config.players + 1

    def points(self) -> int:
        step = self.config.points_step
        raw = self.random.lognormvariate(self._mu, self.config.points_sigma)
        return min(max(0, round(raw / step) * step), self.config.max_points)

    def achieved_at(self, now: datetime) -> datetime:
        return min(max(now, self.config.season_starts_at), self.config.season_ends_at)

    def match(self, now: datetime) -> list[MatchResultMessage]:
        match_id = uuid.UUID(int=self.random.getrandbits(128), version=4)
        size = self.random.randint(2, 8)
        players: set[int] = set()
        while len(players) < min(size, self.config.players):
            players.add(self.player_id())
        achieved_at = self.achieved_at(now)
        return [
            MatchResultMessage(
                match_id=match_id,
                player_id=player_id,
                season_id=self.config.season_id,
                points=self.points(),
                achieved_at=achieved_at,
            )
            for player_id in sorted(players)
        ]


def simulation_run(
    *,
    config: SimulationConfig,
    producer: MatchResultProducer,
    stop: threading.Event,
    on_progress: Callable[[int], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> SimulationStats:
    """Publish simulated results until ``duration`` elapses or ``stop`` is set; then flush."""
    generator = MatchGenerator(config)
    stats = SimulationStats()
    late: deque[tuple[float, bytes, bytes]] = deque()
    pending: deque[MatchResultMessage] = deque()
    started = clock()
    deadline = started + config.duration_seconds if config.duration_seconds > 0 else math.inf
    half = config.duplicates / 2

    def send(key: bytes, value: bytes) -> None:
        producer.send_raw(key=key, value=value)
        stats.messages += 1
        if on_progress is not None:
            on_progress(1)

    while not stop.is_set():
        now = clock()
        if now >= deadline:
            break
        # Messages owed by now at the target rate, minus what was sent.
        owed = int((now - started) * config.rate) + 1 - stats.messages
        while owed > 0 and not stop.is_set():
            if late and late[0][0] <= now:
                _, key, value = late.popleft()
                send(key, value)
                stats.late_duplicates += 1
                owed -= 1
                continue
            if not pending:
                pending.extend(generator.match(datetime.now(tz=UTC)))
                stats.matches += 1
            result = pending.popleft()
            key, value = match_result_key(result), match_result_value(result)
            send(key, value)
            stats.results += 1
            stats.points_seen[result.points] = stats.points_seen.get(result.points, 0) + 1
            owed -= 1
            draw = generator.random.random()
            if draw < half:
                send(key, value)
                stats.retries += 1
                owed -= 1
            elif draw < config.duplicates:
                late.append((now + config.late_delay_seconds, key, value))
        next_slice = min(deadline, now + _SLICE_SECONDS)
        # Event.wait both paces and wakes at once on stop.
        stop.wait(max(0.0, next_slice - clock()))

    stats.stopped_early = stop.is_set()
    stats.late_dropped = len(late)
    producer.flush(timeout=30)
    stats.elapsed_seconds = clock() - started
    return stats


def simulation_config_for_season(*, season_id: int, **options: object) -> SimulationConfig:
    """A config bound to an existing season's window and point range (``LookupError`` if none)."""
    # Imported here, not for a cycle: the rest of this module runs without Django (bench/).
    from seasons.models import Season

    season = Season.objects.filter(id=season_id).first()
    if season is None:
        raise LookupError(f"season {season_id} does not exist (create it with create_season)")
    return SimulationConfig(
        season_id=season.id,
        season_starts_at=season.starts_at,
        season_ends_at=season.ends_at,
        max_points=season.codec.max_points,
        **options,  # type: ignore[arg-type]
    )
