"""Staff's view of the close-out: final standings and grants, and the close-out's pieces of the
Season admin (``RewardTierInline``, the close-out and the review of corrected standings as
season actions), which leaderboard_project.admin assembles with the other apps' pieces; and the
schedules of recurring competitions."""

from __future__ import annotations

from itertools import pairwise
from typing import Any
from zoneinfo import ZoneInfo

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils import timezone

from leaderboard.admin import PlayerSearchMixin
from leaderboard.models import MAIN_BOARD, Board
from seasons.admin import (
    ClosedSeasonFrozenInline,
    LargeTableAdmin,
    ReadOnlyAdmin,
    confirmed_action,
    csv_export_action,
)
from seasons.cron import CronError
from seasons.models import Schedule, Season
from seasons.selectors import schedule_next_occurrences

from .models import FinalStanding, HistoryArchive, HistoryEntry, RewardGrant, RewardTier
from .services import (
    CloseOutcome,
    schedule_create,
    schedule_league_check,
    schedule_league_set,
    schedule_set_active,
    season_close,
    season_standings_correct,
    season_standings_review,
)
from .services.schedules import MAX_LEAD_MINUTES


@confirmed_action(
    description="Close out the selected seasons",
    explanation=(
        "Each season stops taking new results now (those achieved before its end and still "
        "queued are still counted). Once the consumer has drained the topic, its final "
        "standings are copied from PostgreSQL, rewards are granted by tier and its Redis keys "
        "are dropped; until then the periodic close-out keeps checking. Running it again "
        "grants nothing twice."
    ),
)
def close_season(season: Season) -> str:
    # One look at the consumer's offsets, no waiting inside a web request.
    result = season_close(season_id=season.id, drain_timeout_seconds=0)
    if result.outcome in (CloseOutcome.LAGGING, CloseOutcome.LEAGUE_WAITING):
        raise ValidationError(result.describe())  # shown as an error, not a success
    return result.describe()


@admin.action(
    description="Review corrected final standings (closed seasons)", permissions=["change"]
)
def review_final_standings(
    modeladmin: admin.ModelAdmin[Season], request: HttpRequest, queryset: QuerySet[Season]
) -> TemplateResponse | None:
    fingerprint = request.POST.get("fingerprint")
    if fingerprint:
        for season in queryset:
            try:
                review = season_standings_correct(season_id=season.id, fingerprint=fingerprint)
            except ValidationError as exc:
                modeladmin.message_user(
                    request, f"season {season.id}: {'; '.join(exc.messages)}", messages.ERROR
                )
                continue
            modeladmin.message_user(
                request,
                f"season {season.id}: {len(review.standings)} standing(s) and "
                f"{len(review.grants)} grant(s) corrected.",
                messages.SUCCESS,
            )
        return None
    reviews = []
    for season in queryset.order_by("id"):
        try:
            reviews.append(season_standings_review(season_id=season.id))
        except ValidationError as exc:
            modeladmin.message_user(
                request, f"season {season.id}: {'; '.join(exc.messages)}", messages.ERROR
            )
    if not reviews:
        return None
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": "Corrected final standings and grants",
        "reviews": reviews,
        "opts": modeladmin.model._meta,
        "action": "review_final_standings",
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
    }
    return TemplateResponse(request, "admin/closeout/standings_review.html", context)


class RewardTierForm(forms.ModelForm):
    """A tier row: the board is one of the season's, the main board when left empty."""

    class Meta:
        model = RewardTier
        fields = ("board", "league_tier", "rank_from", "rank_to", "reward_name", "quantity")

    def __init__(self, *args: Any, season_id: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        board = self.fields["board"]
        board.required = False
        board.help_text = "empty: the main board"
        # From the formset: a new row's instance gets its season only after the form is built,
        # so on its own a new row offered (and accepted) every season's boards.
        season_id = season_id if season_id is not None else self.instance.season_id
        board.queryset = Board.objects.filter(season_id=season_id).order_by("id")  # type: ignore[attr-defined]

    def clean_board(self) -> Board | None:
        board: Board | None = self.cleaned_data.get("board")
        if board is None and self.instance.season_id is not None:
            board = Board.objects.filter(season_id=self.instance.season_id, slug=MAIN_BOARD).first()
        return board


class RewardTierFormSet(BaseInlineFormSet):
    def get_form_kwargs(self, index: int | None) -> dict[str, Any]:
        # None while the season is being added: it has no boards yet (the main board then).
        return {**super().get_form_kwargs(index), "season_id": self.instance.pk}

    def save_new(self, form: Any, commit: bool = True) -> RewardTier:
        # Left empty on a season being added: its main board exists only once the boards are
        # saved (SeasonBoardsMixin.save_related saves them first).
        if form.instance.board_id is None:
            form.instance.board = Board.objects.get(season_id=self.instance.pk, slug=MAIN_BOARD)
        tier: RewardTier = super().save_new(form, commit=commit)
        return tier

    def clean(self) -> None:
        super().clean()
        ranges: dict[object, list[tuple[int, int]]] = {}
        for form in self.forms:
            data = getattr(form, "cleaned_data", None)
            if not data or data.get("DELETE") or data.get("rank_from") is None:
                continue
            key = (data.get("board"), data.get("league_tier") or "")
            ranges.setdefault(key, []).append(
                (data["rank_from"], data.get("rank_to") or data["rank_from"])
            )
        for board_ranges in ranges.values():
            board_ranges.sort()
            for (low_a, high_a), (low_b, high_b) in pairwise(board_ranges):
                if low_b <= high_a:
                    raise forms.ValidationError(
                        f"tiers {low_a}-{high_a} and {low_b}-{high_b} overlap: a rank has one tier"
                    )


class RewardTierInline(ClosedSeasonFrozenInline, admin.TabularInline):
    model = RewardTier
    form = RewardTierForm
    formset = RewardTierFormSet
    extra = 1
    fields = ("board", "league_tier", "rank_from", "rank_to", "reward_name", "quantity")


@admin.register(FinalStanding)
class FinalStandingAdmin(PlayerSearchMixin, LargeTableAdmin, ReadOnlyAdmin):
    # Each board of a season has its own standings: the board says whose rank it is.
    list_display = ("season", "board", "rank", "player_id", "points", "reached_at", "attempts")
    list_filter = ("season",)
    search_fields = ("=player_id",)
    # The columns, not the model's ordering through the board's (its season's start): no join
    # and sort of the whole table for a page.
    ordering = ("season_id", "board_id", "rank")
    list_select_related = ("season", "board")
    actions = [
        csv_export_action(
            fields=(
                "season_id",
                "board__slug",
                "rank",
                "player_id",
                "points",
                "reached_at",
                "attempts",
            ),
            filename="final_standings.csv",
        )
    ]


@admin.register(HistoryEntry)
class HistoryEntryAdmin(LargeTableAdmin, ReadOnlyAdmin):
    """Every player's archived final entries: searched by player id (an index scan), filtered by
    season; no full count on a table of millions of rows."""

    list_display = (
        "season",
        "board",
        "rank",
        "total",
        "player_id",
        "points",
        "tier",
        "movement",
        "reward_name",
    )
    list_filter = ("season",)
    search_fields = ("=player_id",)
    list_select_related = ("season", "board")


@admin.register(HistoryArchive)
class HistoryArchiveAdmin(ReadOnlyAdmin):
    """Which boards' history is archived, how many players and how long it took."""

    list_display = ("season", "board", "rows", "seconds", "archived_at")
    list_filter = ("season",)
    list_select_related = ("season", "board")


@admin.register(RewardGrant)
class RewardGrantAdmin(PlayerSearchMixin, LargeTableAdmin, ReadOnlyAdmin):
    list_display = ("season", "board", "rank", "player_id", "reward_name", "quantity", "status")
    list_filter = ("season", "status")
    list_editable = ("status",)
    search_fields = ("=player_id",)
    # The columns, not the model's ordering through the board's (its season's start): no join
    # and sort of the whole table for a page.
    ordering = ("season_id", "board_id", "rank")
    list_select_related = ("season", "board")
    fields = ("season", "tier", "rank", "player_id", "reward_name", "quantity", "status")
    readonly_fields = ("season", "tier", "rank", "player_id", "reward_name", "quantity")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Only the status changes (delivered, revoked): everything else is what was granted.
        return admin.ModelAdmin.has_change_permission(self, request, obj)

    actions = [
        csv_export_action(
            fields=(
                "season_id",
                "board__slug",
                "rank",
                "player_id",
                "reward_name",
                "quantity",
                "status",
                "created_at",
            ),
            filename="reward_grants.csv",
        )
    ]


# --- Schedules -----------------------------------------------------------------------------


class ScheduleSeasonInline(admin.TabularInline):
    """The schedule's seasons, newest occurrence first (each links to its season page)."""

    model = Season
    fk_name = "schedule"
    fields = ("id", "name", "occurrence", "starts_at", "ends_at", "status")
    readonly_fields = fields
    ordering = ("-occurrence",)
    extra = 0
    max_num = 0
    can_delete = False
    show_change_link = True
    verbose_name_plural = "Seasons of this schedule"


class ScheduleForm(forms.ModelForm):
    class Meta:
        model = Schedule
        fields = [
            "slug",
            "name",
            "cron",
            "timezone",
            "template_season",
            "lead_minutes",
            "active",
            "tiers",
            "promote_percent",
            "relegate_percent",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A schedule without a league leaves them empty (0).
        for name in ("promote_percent", "relegate_percent"):
            self.fields[name].required = False

    def clean_lead_minutes(self) -> int:
        value = self.cleaned_data["lead_minutes"]
        if value > MAX_LEAD_MINUTES:
            raise ValidationError(f"At most {MAX_LEAD_MINUTES} minutes (a week).")
        return value

    def clean_promote_percent(self) -> int:
        return self.cleaned_data.get("promote_percent") or 0

    def clean_relegate_percent(self) -> int:
        return self.cleaned_data.get("relegate_percent") or 0

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        template = data.get("template_season")
        if template is not None and not self.errors:
            # The service's own check (a league needs a template board with cohorts, and the
            # template's reward tiers may name only its tiers), shown on the form.
            try:
                schedule_league_check(
                    template_season_id=template.id,
                    tiers=data.get("tiers") or (),
                    promote_percent=data.get("promote_percent") or 0,
                    relegate_percent=data.get("relegate_percent") or 0,
                )
            except ValidationError as exc:
                self.add_error("tiers", exc)
        return data


def _schedules_set_active(
    modeladmin: admin.ModelAdmin[Schedule],
    request: HttpRequest,
    queryset: QuerySet[Schedule],
    *,
    active: bool,
    outcome: str,
) -> None:
    for schedule in queryset:
        schedule_set_active(schedule_id=schedule.id, active=active)
    modeladmin.message_user(request, f"{queryset.count()} schedule(s) {outcome}", messages.SUCCESS)


@admin.action(description="Pause the selected schedules", permissions=["change"])
def pause_schedules(
    modeladmin: admin.ModelAdmin[Schedule], request: HttpRequest, queryset: QuerySet[Schedule]
) -> None:
    _schedules_set_active(
        modeladmin, request, queryset, active=False, outcome="paused: they create no new season."
    )


@admin.action(description="Resume the selected schedules", permissions=["change"])
def resume_schedules(
    modeladmin: admin.ModelAdmin[Schedule], request: HttpRequest, queryset: QuerySet[Schedule]
) -> None:
    _schedules_set_active(
        modeladmin,
        request,
        queryset,
        active=True,
        outcome="resumed; occurrences whose seasons ended while paused are skipped.",
    )


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    form = ScheduleForm
    list_display = (
        "slug",
        "name",
        "cron",
        "timezone",
        "active",
        "league",
        "last_occurrence",
        "occurrences_skipped",
        "next_occurrences",
    )
    list_filter = ("active",)
    search_fields = ("slug", "name")
    readonly_fields = (
        "next_occurrences",
        "last_occurrence",
        "last_occurrence_at",
        "occurrences_skipped",
        "starts_from",
        "created_at",
    )
    inlines = [ScheduleSeasonInline]
    actions = [pause_schedules, resume_schedules]

    @admin.display(description="League")
    def league(self, obj: Schedule) -> str:
        if not obj.tiers:
            return "-"
        return f"{' < '.join(obj.tiers)}: {obj.promote_percent}% up, {obj.relegate_percent}% down"

    @admin.display(description="Next occurrences")
    def next_occurrences(self, obj: Schedule) -> str:
        if obj.pk is None:
            return "-"
        try:
            ticks = schedule_next_occurrences(schedule=obj, after=timezone.now(), count=3)
        except CronError as exc:
            return str(exc)
        zone = ZoneInfo(obj.timezone)
        return ", ".join(t.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z") for t in ticks)

    def save_model(
        self, request: HttpRequest, obj: Schedule, form: forms.ModelForm, change: bool
    ) -> None:
        league_fields = {"tiers", "promote_percent", "relegate_percent"}
        if change:
            # The league goes through its service (the seasons created from now on use it).
            league = league_fields & set(form.changed_data)
            if league:
                saved = Schedule.objects.get(pk=obj.pk)
                obj.tiers, obj.promote_percent, obj.relegate_percent = (
                    saved.tiers,
                    saved.promote_percent,
                    saved.relegate_percent,
                )
            # Only what the form changed (the league's own fields through its service): a full
            # save wrote back last_occurrence as loaded, undoing an occurrence the schedule
            # created while the form was open, and every run then failed to create it again.
            changed = [f for f in form.changed_data if f not in league_fields]
            if changed:
                obj.save(update_fields=[*changed, "updated_at"])
            if league:
                data = form.cleaned_data
                schedule_league_set(
                    schedule_id=obj.pk,
                    tiers=data.get("tiers") or (),
                    promote_percent=data.get("promote_percent") or 0,
                    relegate_percent=data.get("relegate_percent") or 0,
                )
            return
        # A new schedule goes through the service, which checks the template can be copied.
        created = schedule_create(
            slug=obj.slug,
            name=obj.name,
            cron=obj.cron,
            template_season_id=obj.template_season_id,
            timezone_name=obj.timezone,
            lead_minutes=obj.lead_minutes,
            tiers=obj.tiers or (),
            promote_percent=obj.promote_percent,
            relegate_percent=obj.relegate_percent,
        )
        if not obj.active:
            schedule_set_active(schedule_id=created.id, active=False)
        obj.pk = created.pk
