from __future__ import annotations

import dataclasses
import signal
import threading
from argparse import ArgumentParser
from collections import Counter
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from tqdm import tqdm

from ingestion.producer import MatchResultProducer
from ingestion.simulation import SimulationConfig, simulation_config_for_season, simulation_run
from leaderboard.management.arguments import ID_MAX, SECONDS_MAX, int_between, number_between
from leaderboard.models import Board
from leaderboard.services import JoinRefused, board_player_join
from seasons.models import Season
from seasons.selectors import schedule_get, schedule_view

# --schedule: how often to look for the next season, and how long before a season's end to stop.
_SCHEDULE_POLL_SECONDS = 5.0
_SEASON_END_MARGIN_SECONDS = 3.0
# Far past what one producer process sends; it only bounds a typo.
RATE_MAX = 10_000_000.0


class Command(BaseCommand):
    help = (
        "Publish simulated match results to Kafka at a steady rate (skewed players, ties, "
        "retries, late duplicates). --duration 0 runs until Ctrl-C/SIGTERM."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--season", type=int, help="an existing season id")
        target.add_argument(
            "--schedule",
            help="a schedule's slug: play its current season, then each next one as it starts "
            "(--duration counts per season; 0: each until it ends)",
        )
        parser.add_argument("--players", type=int_between(1, ID_MAX), default=1_000_000)
        parser.add_argument(
            "--rate", type=number_between(0, RATE_MAX), default=2_000, help="messages per second"
        )
        parser.add_argument(
            "--duration",
            type=number_between(0, SECONDS_MAX),
            default=60,
            help="seconds; 0 = forever",
        )
        parser.add_argument(
            "--duplicates",
            type=number_between(0, 1),
            default=0.0,
            help="fraction re-sent (retries + late)",
        )
        parser.add_argument(
            "--late-delay", type=number_between(0, SECONDS_MAX), default=5.0, help="seconds"
        )
        parser.add_argument("--points-mean", type=int, default=1_500)
        parser.add_argument("--points-step", type=int, default=10, help="coarser = more ties")
        parser.add_argument("--seed", type=int, default=None)
        parser.add_argument(
            "--boards",
            default=None,
            help="comma-separated board slugs, or * for every board of the season (default main)",
        )
        parser.add_argument(
            "--spread",
            action="store_true",
            help="each player result goes to one of the boards in turn, not to every one",
        )
        parser.add_argument("--topic", default=None, help="default: KAFKA_MATCH_RESULTS_TOPIC")
        parser.add_argument(
            "--names",
            action="store_true",
            help="give players names and countries (contract 0.3): a share of the results carry "
            "displayName, as many profiles go to KAFKA_PLAYER_PROFILES_TOPIC",
        )
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        stop = threading.Event()

        def request_stop(signum: int, frame: FrameType | None) -> None:
            stop.set()

        previous = {
            sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            if options["schedule"] is None:
                self._play(season_id=options["season"], stop=stop, options=options)
            else:
                self._follow(slug=options["schedule"], stop=stop, options=options)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _follow(self, *, slug: str, stop: threading.Event, options: dict[str, Any]) -> None:
        """Each current season of the schedule in turn, until stopped."""
        played: set[int] = set()
        while not stop.is_set():
            schedule = schedule_get(slug=slug)
            if schedule is None:
                raise CommandError(f"schedule {slug!r} does not exist (create_schedule)")
            view = schedule_view(schedule=schedule)
            season_id = view.current_season_id
            if season_id is None or season_id in played:
                stop.wait(_SCHEDULE_POLL_SECONDS)  # between seasons, or the next not created yet
                continue
            season = Season.objects.get(id=season_id)
            # Stop a little before the end: a result sent as the season closes is a dead letter.
            left = (season.ends_at - timezone.now()).total_seconds() - _SEASON_END_MARGIN_SECONDS
            if left > 0:
                duration = min(options["duration"] or left, left)
                self._play(
                    season_id=season_id, stop=stop, options={**options, "duration": duration}
                )
            played.add(season_id)

    def _seat_tournament_players(self, config: SimulationConfig) -> SimulationConfig:
        """Join each tournament board's candidates (as a game server would, before they play
        it); only those who got a seat play it."""
        boards = []
        for simulated in config.simulated_boards():
            if simulated.players is None:
                boards.append(simulated)
                continue
            board = Board.objects.get(season_id=config.season_id, slug=simulated.slug)
            seated, refused = [], Counter[str]()
            for player_id in simulated.players:
                try:
                    board_player_join(board_id=board.id, player_id=player_id)
                    seated.append(player_id)
                except JoinRefused as exc:
                    refused[exc.code] += 1
            self.stdout.write(
                f"board {simulated.slug!r}: {len(seated)} simulated players seated"
                + "".join(f", {n} refused ({code})" for code, n in sorted(refused.items()))
            )
            boards.append(dataclasses.replace(simulated, players=tuple(seated)))
        return dataclasses.replace(config, boards=tuple(boards))

    def _play(self, *, season_id: int, stop: threading.Event, options: dict[str, Any]) -> None:
        try:
            config = simulation_config_for_season(
                season_id=season_id,
                players=options["players"],
                rate=options["rate"],
                duration_seconds=options["duration"],
                duplicates=options["duplicates"],
                late_delay_seconds=options["late_delay"],
                points_mean=options["points_mean"],
                points_step=options["points_step"],
                seed=options["seed"],
                profiles_topic=settings.KAFKA_PLAYER_PROFILES_TOPIC if options["names"] else None,
                board_slugs=None if options["boards"] is None else options["boards"].split(","),
                spread=options["spread"],
            )
        except (LookupError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        config = self._seat_tournament_players(config)
        total = int(config.rate * config.duration_seconds) or None
        topic = options["topic"] or settings.KAFKA_MATCH_RESULTS_TOPIC
        with (
            MatchResultProducer.from_settings(topic=topic, client_id="simulate-matches") as p,
            tqdm(
                total=total,
                unit="msg",
                desc=f"season {config.season_id} -> {topic}",
                disable=options["no_progress"],
                smoothing=0.1,
            ) as bar,
        ):
            stats = simulation_run(config=config, producer=p, stop=stop, on_progress=bar.update)

        self.stdout.write(
            f"season {config.season_id}: sent {stats.messages} messages in "
            f"{stats.elapsed_seconds:.1f}s "
            f"({stats.rate:.0f}/s): {stats.results} results in {stats.matches} matches, "
            f"{stats.retries} retries, {stats.late_duplicates} late duplicates "
            f"({stats.late_dropped} not yet due when stopped), {stats.ties} results tying "
            f"an earlier one's points" + (" — stopped early" if stats.stopped_early else "")
        )
