"""The Season admin, assembled once from every app's pieces.

Each app owns its pieces of the season page (inlines, a mixin, actions) and exports them; this
module, above every app in the layers, is the one place that combines them and registers the
result. So no app replaces another's admin, and what staff see does not depend on the order of
INSTALLED_APPS. The player profiles' admin is registered here too: its list needs the seasons
app's paginator for tables of millions of rows, and the players app sits beside seasons in the
layers. Every other model's admin is registered by its own app.
"""

from __future__ import annotations

from django.contrib import admin

from closeout.admin import RewardTierInline, close_season, review_final_standings
from leaderboard.admin import BoardInline, SeasonBoardsMixin, rebuild_board, reconcile_boards
from players.admin import PlayerProfileAdminBase
from players.models import PlayerProfile
from seasons.admin import LargeTableAdmin, SeasonAdminBase, make_active, make_closing
from seasons.models import Season


@admin.register(Season)
class SeasonAdmin(SeasonBoardsMixin, SeasonAdminBase):
    inlines = [BoardInline, RewardTierInline]
    actions = [
        close_season,
        make_active,
        make_closing,
        rebuild_board,
        reconcile_boards,
        review_final_standings,
    ]


@admin.register(PlayerProfile)
class PlayerProfileAdmin(LargeTableAdmin, PlayerProfileAdminBase):
    pass
