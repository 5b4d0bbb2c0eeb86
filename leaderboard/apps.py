from django.apps import AppConfig


class LeaderboardConfig(AppConfig):
    name = "leaderboard"
    verbose_name = "Leaderboards"

    def ready(self) -> None:
        # The name cache follows every profile write (leaderboard/player_names.py says why a
        # signal: the players app sits below this one).
        from players.signals import profiles_changed

        from .player_names import player_names_on_change

        profiles_changed.connect(player_names_on_change, dispatch_uid="leaderboard.player_names")
