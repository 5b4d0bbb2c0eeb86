from django.contrib import admin

from .models import MatchResult


@admin.register(MatchResult)
class MatchResultAdmin(admin.ModelAdmin):
    list_display = ("match_id", "player_id", "season", "points", "achieved_at", "voided_at")
    list_filter = ("season",)
    search_fields = ("=player_id", "=match_id")
    show_full_result_count = False  # COUNT(*) over tens of millions of rows is not free
