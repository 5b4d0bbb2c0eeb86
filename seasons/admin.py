from django.contrib import admin

from .models import Season


@admin.register(Season)
class SeasonAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "status", "rule", "starts_at", "ends_at")
    list_filter = ("status", "rule")
    search_fields = ("name",)
    readonly_fields = ("time_bits", "created_at", "updated_at", "closed_at")
