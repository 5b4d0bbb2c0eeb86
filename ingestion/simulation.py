"""A load generator that behaves like a fleet of game servers (``simulate_matches``).

What makes it realistic enough to exercise the consumer:

- matches of 2 to 8 players, one message per player result, sharing the match id;
- skewed activity: a fifth of the players (the "regulars") play 80% of the matches, the rest
  are picked uniformly; player ids are scattered so regulars are not ids 1..N/5;
- points drawn from a lognormal around ``points_mean`` and rounded to ``points_step`` so equal
  points (ties) are common, clipped to 0..the season codec's maximum;
- ``achievedAt`` = now, clamped into the season's window (ticks collide too: more ties);
- boards: by default the ``main`` board only; with ``boards``, each player result goes to every
  listed board (``spread=False``: a match scores, kills and lap times at once) or to one of them
  in turn (``spread=True``: the same number of results spread over the boards), each board with
  its own point distribution;
- duplicates, a ``duplicates`` fraction of the results: half are producer retries (the same
  bytes re-sent at once), half late duplicates (the same result re-sent ``late_delay`` seconds
  later as a new message, as a game server retrying after a timeout would);
- tournaments (contract 0.3): a board that requires joining gets results only from the players
  seated on it (``SimulatedBoard.players``: simulate_matches joins them first), one match in
  four is played among them, and a board with max-attempts gets at most that many results per
  player from this run;
- names (contract 0.3), with ``profiles_topic``: each player has a stable made-up name and
  country; a ``names_share`` of the results carry the player's ``displayName``, and as many
  times a whole profile (name, country, updatedAt = now) goes to the profiles topic.

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

import msgspec

from players.schema import ProfileUpdate

from .producer import MatchResultProducer, match_result_key, match_result_value
from .schema import MatchResultMessage

_NAME_HEADS = ("Swift", "Iron", "Shadow", "Lucky", "Crimson", "Silent", "Neon", "Frost", "Élan")
_NAME_TAILS = ("Fox", "Wolf", "Falcon", "Otter", "Tiger", "Raven", "Comet", "Mage", "Ninja")
# None: a player who never said.
_COUNTRIES = ("FR", "DE", "US", "BR", "JP", "KR", "GB", "ES", "PL", "SE", "CA", None)

# Pacing granularity: one slice of messages every 20 ms keeps the rate smooth at 20,000/s.
_SLICE_SECONDS = 0.02
REGULARS_SHARE = 0.2
REGULARS_ACTIVITY = 0.8


@dataclass(frozen=True, slots=True)
class SimulatedBoard:
    """A board the simulator writes to, and how its points are drawn."""

    slug: str
    max_points: int
    points_mean: int = 1_500
    points_sigma: float = 0.5
    points_step: int = 10
    # The board keeps metadata (contract 0.3): each result carries a car and a replay id.
    metadata: bool = False
    # The board's tie-break column names (contract 0.3): each result carries a value of each,
    # drawn from 0..TIEBREAK_DRAW_MAX (kills, deaths: small counts that tie often).
    tiebreaks: tuple[str, ...] = ()
    # A tournament board (contract 0.3): the players seated on it, the only ones who play it
    # (None: every player); and the results per player it takes (None: unlimited).
    players: tuple[int, ...] | None = None
    max_attempts: int | None = None


# A tournament's candidates: the first ids, this many more than its seats (the last are told
# the board is full). Without a limit, this many join.
TOURNAMENT_EXTRA_CANDIDATES = 8
TOURNAMENT_DEFAULT_SEATS = 64
# One match in this many is played among a tournament's seated players.
TOURNAMENT_MATCH_EVERY = 4


# What a racing game would attach to a lap time.
_CARS = ("Aster GT", "Boreal R", "Cinder S", "Drift 86", "Ember RS", "Falcon V8")


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
    # Empty: the main board, with the points settings above.
    boards: tuple[SimulatedBoard, ...] = ()
    spread: bool = False
    # Names (contract 0.3): None publishes none.
    profiles_topic: str | None = None
    names_share: float = 0.05

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
        if any(b.points_step < 1 or b.points_mean < 0 for b in self.boards):
            raise ValueError("every board's points_step must be >= 1 and points_mean >= 0")

    def simulated_boards(self) -> tuple[SimulatedBoard, ...]:
        if self.boards:
            return self.boards
        return (
            SimulatedBoard(
                slug="main",
                max_points=self.max_points,
                points_mean=self.points_mean,
                points_sigma=self.points_sigma,
                points_step=self.points_step,
            ),
        )


@dataclass(slots=True)
class SimulationStats:
    messages: int = 0  # everything sent, duplicates included
    results: int = 0  # distinct results
    matches: int = 0
    retries: int = 0
    late_duplicates: int = 0
    late_dropped: int = 0  # late duplicates still waiting when the run stopped
    profiles: int = 0  # profiles sent to the profiles topic (not in messages)
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
        self._boards = config.simulated_boards()
        # Median of each board's lognormal at its points_mean.
        self._mu = {b.slug: math.log(max(b.points_mean, 1)) for b in self._boards}
        self._next_board = 0
        # Tournaments: who may play each board that requires joining, and the results this run
        # gave each (board, player) on a board with max-attempts.
        self._seated = {b.slug: frozenset(b.players) for b in self._boards if b.players is not None}
        self._tournament_players = sorted(set().union(*self._seated.values()))
        self._attempts: dict[tuple[str, int], int] = {}
        self._matches = 0

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

    def points(self, board: SimulatedBoard | None = None) -> int:
        board = board or self._boards[0]
        step = board.points_step
        raw = self.random.lognormvariate(self._mu[board.slug], board.points_sigma)
        return min(max(0, round(raw / step) * step), board.max_points)

    def _boards_of_result(self) -> tuple[SimulatedBoard, ...]:
        if not self.config.spread:
            return self._boards
        board = self._boards[self._next_board % len(self._boards)]
        self._next_board += 1
        return (board,)

    @staticmethod
    def display_name(player_id: int) -> str:
        """The player's made-up name: stable for an id, and often shared (like real names)."""
        return (
            f"{_NAME_HEADS[player_id % len(_NAME_HEADS)]}"
            f"{_NAME_TAILS[(player_id // len(_NAME_HEADS)) % len(_NAME_TAILS)]}"
            f"{player_id % 1000}"
        )

    @staticmethod
    def country(player_id: int) -> str | None:
        return _COUNTRIES[(player_id * 7) % len(_COUNTRIES)]

    def achieved_at(self, now: datetime) -> datetime:
        return min(max(now, self.config.season_starts_at), self.config.season_ends_at)

    def _plays(self, board: SimulatedBoard, player_id: int) -> bool:
        """Whether the player's result goes to the board: seated on a tournament board, with an
        attempt left on a board with max-attempts (counted here when it does)."""
        seated = self._seated.get(board.slug)
        if seated is not None and player_id not in seated:
            return False
        if board.max_attempts is None:
            return True
        used = self._attempts.get((board.slug, player_id), 0)
        if used >= board.max_attempts:
            return False
        self._attempts[(board.slug, player_id)] = used + 1
        return True

    def match(self, now: datetime) -> list[MatchResultMessage]:
        match_id = uuid.UUID(int=self.random.getrandbits(128), version=4)
        size = self.random.randint(2, 8)
        players: set[int] = set()
        self._matches += 1
        if self._tournament_players and self._matches % TOURNAMENT_MATCH_EVERY == 0:
            size = min(size, len(self._tournament_players))
            players.update(self.random.sample(self._tournament_players, size))
        while len(players) < min(size, self.config.players):
            players.add(self.player_id())
        achieved_at = self.achieved_at(now)
        return [
            MatchResultMessage(
                match_id=match_id,
                player_id=player_id,
                season_id=self.config.season_id,
                points=self.points(board),
                achieved_at=achieved_at,
                board=board.slug,
                metadata=self._metadata(match_id, player_id) if board.metadata else None,
                tiebreakers={
                    name: self.random.randint(0, TIEBREAK_DRAW_MAX) for name in board.tiebreaks
                }
                if board.tiebreaks
                else None,
            )
            for player_id in sorted(players)
            for board in self._boards_of_result()
            if (board.players is None and board.max_attempts is None)
            or self._plays(board, player_id)
        ]

    def _metadata(self, match_id: uuid.UUID, player_id: int) -> bytes:
        car = _CARS[self.random.randrange(len(_CARS))]
        return f'{{"car":"{car}","replay":"r-{match_id.hex[:12]}-{player_id}"}}'.encode()


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

    # Its own stream of draws: the results are the same with or without names.
    names = random.Random(None if config.seed is None else config.seed + 1)  # noqa: S311

    def with_name(result: MatchResultMessage) -> MatchResultMessage:
        if config.profiles_topic is None or names.random() >= config.names_share:
            return result
        player = result.player_id
        if names.random() < 0.5:
            profile = ProfileUpdate(
                player_id=player,
                display_name=generator.display_name(player),
                country=generator.country(player),
                avatar_url=None,
                updated_at=result.achieved_at,
            )
            producer.send_raw(
                key=match_result_key(result), value=profile.to_bytes(), topic=config.profiles_topic
            )
            stats.profiles += 1
            return result
        return msgspec.structs.replace(result, display_name=generator.display_name(player))

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
            result = with_name(pending.popleft())
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


# Point distributions the simulator gives boards by kind: a lap time in milliseconds for a
# board where lower wins, a handful per match for a sum (kills), the default otherwise.
# Coarse points on a board with tie-break columns: equal points are common, so the columns decide.
_TIEBREAK_POINTS = {"points_mean": 1_000, "points_sigma": 0.3, "points_step": 250}
TIEBREAK_DRAW_MAX = 30
_ASC_POINTS = {"points_mean": 90_000, "points_sigma": 0.15, "points_step": 1}
_CUMULATIVE_POINTS = {"points_mean": 5, "points_sigma": 0.6, "points_step": 1}


def simulation_config_for_season(
    *, season_id: int, board_slugs: list[str] | None = None, **options: object
) -> SimulationConfig:
    """A config bound to an existing season's window and its boards' point ranges
    (``LookupError`` if the season or a board does not exist). ``board_slugs``: the boards to
    write to (None: main only; ["*"]: every board of the season)."""
    # Imported here, not for a cycle: the rest of this module runs without Django (bench/).
    from leaderboard.models import MAIN_BOARD, Board, BoardOrder, ScoringRule
    from seasons.models import Season

    season = Season.objects.filter(id=season_id).first()
    if season is None:
        raise LookupError(f"season {season_id} does not exist (create it with create_season)")
    boards = {b.slug: b for b in Board.objects.filter(season_id=season_id).order_by("id")}
    wanted = [MAIN_BOARD] if board_slugs is None else board_slugs
    if wanted == ["*"]:
        wanted = list(boards)
    missing = [slug for slug in wanted if slug not in boards]
    if missing:
        raise LookupError(f"season {season_id} has no board(s) {', '.join(missing)}")
    simulated = []
    for slug in wanted:
        board = boards[slug]
        shape: dict[str, object] = {}
        if board.tiebreak_columns:
            shape = dict(_TIEBREAK_POINTS)
        elif board.order == BoardOrder.ASC:
            shape = dict(_ASC_POINTS)
        elif board.rule == ScoringRule.CUMULATIVE:
            shape = dict(_CUMULATIVE_POINTS)
        elif slug == MAIN_BOARD or len(wanted) == 1:
            shape = {key: options[key] for key in ("points_mean", "points_step") if key in options}
        candidates = None
        if board.join_required:
            # Who may join: simulate_matches joins them, and keeps those who got a seat.
            seats = board.max_size or TOURNAMENT_DEFAULT_SEATS
            players = options.get("players")
            count = seats + TOURNAMENT_EXTRA_CANDIDATES
            candidates = tuple(
                range(1, (min(count, players) if isinstance(players, int) else count) + 1)
            )
        simulated.append(
            SimulatedBoard(
                slug=slug,
                max_points=board.max_points,
                metadata=board.keeps_metadata,
                tiebreaks=board.tiebreak_names,
                players=candidates,
                max_attempts=board.max_attempts,
                **shape,  # type: ignore[arg-type]
            )
        )
    main = boards.get(MAIN_BOARD)
    return SimulationConfig(
        season_id=season.id,
        season_starts_at=season.starts_at,
        season_ends_at=season.ends_at,
        max_points=main.codec.max_points if main is not None else simulated[0].max_points,
        boards=tuple(simulated),
        **options,  # type: ignore[arg-type]
    )
