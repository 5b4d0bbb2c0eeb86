from django.apps import AppConfig


class LeaderboardConfig(AppConfig):
    name = "leaderboard"
    verbose_name = "Leaderboards"

    def ready(self) -> None:
        from django.conf import settings

        from .throttling import parse_rate

        # At start, not at the first request: a mistyped rate stops the process naming it,
        # rather than answering every public read 500 while /healthz stays green.
        parse_rate(settings.API_ANON_THROTTLE_RATE)
        # The name cache follows every profile write (leaderboard/player_names.py says why a
        # signal: the players app sits below this one).
        from players.signals import profiles_changed

        from .player_names import player_names_on_change

        profiles_changed.connect(player_names_on_change, dispatch_uid="leaderboard.player_names")
