"""Staff's view of the boards: match results and their voids, bans, the records of rebuilds
and reconciles, and the boards' pieces of the Season admin (``BoardInline``,
``SeasonBoardsMixin``, the rebuild and reconcile actions), which leaderboard_project.admin
assembles with the other apps' pieces."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.forms.formsets import DELETION_FIELD_NAME
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from seasons.admin import (
    ClosedSeasonFrozenInline,
    LargeTableAdmin,
    ReadOnlyAdmin,
    SeasonAdminBase,
    confirmed_action,
)
from seasons.models import Season, SeasonStatus

from .models import (
    MAIN_BOARD,
    Board,
    Cohort,
    CohortMember,
    LeagueMovement,
    MatchResult,
    Participant,
    PlayerBan,
    RebuildRun,
    ReconcileRun,
    RefusedResult,
    TiebreakSpecError,
    tiebreak_columns_parse,
    tiebreak_spec_parse,
)
from .selectors.boards import board_list
from .selectors.cohorts import board_cohorts_summary
from .selectors.overview import BoardOverview, board_overview_get
from .selectors.results import (
    match_results_of_player,
    rows_of_player_on_every_board,
    seasons_with_results,
)
from .services import (
    EVENT_FIELDS,
    SCORE_FIELDS,
    TOURNAMENT_FIELDS,
    Correction,
    board_create,
    board_players_remove,
    board_update,
    event_top_n_check,
    match_results_void,
    player_ban,
    player_unban,
    season_boards_fit,
    season_end_check,
    tiebreak_columns_json,
    tournament_options_check,
)
from .tasks import board_rebuild_task, board_reconcile_task, boards_correct_task


def _queue_board_corrections(correction: Correction) -> str:
    """Queue the rebuild of what a correction touched, once its transaction has committed."""
    days = [d.isoformat() for d in correction.days]
    board_ids = None if correction.board_ids is None else list(correction.board_ids)
    subjects = [s.as_task_arg() for s in correction.subjects]
    transaction.on_commit(
        lambda: boards_correct_task.delay(
            season_id=correction.season_id, days=days, board_ids=board_ids, subjects=subjects
        )
    )
    which = "every board" if board_ids is None else f"{len(board_ids)} board(s)"
    return (
        f"season {correction.season_id}: {which}, with {len(days)} daily board(s) and their "
        "weekly boards, are being rebuilt (a closed season: review its final standings)"
    )


@admin.action(description="Void the selected results (asks for a reason)", permissions=["change"])
def void_match_results(
    modeladmin: admin.ModelAdmin[MatchResult],
    request: HttpRequest,
    queryset: QuerySet[MatchResult],
) -> TemplateResponse | None:
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": "Void match results",
        "queryset": queryset,
        "opts": modeladmin.model._meta,
        "action": "void_match_results",
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
    }
    form = TemplateResponse(request, "admin/leaderboard/void_results.html", context)
    if request.POST.get("confirmed") != "yes":
        return form
    try:
        with transaction.atomic():
            corrections = match_results_void(
                result_ids=list(queryset.values_list("id", flat=True)),
                reason=request.POST.get("reason", ""),
            )
            for correction in corrections:
                modeladmin.message_user(
                    request, _queue_board_corrections(correction), messages.INFO
                )
    except ValidationError as exc:
        # The service's refusal (no reason, or one PostgreSQL cannot store): asked again.
        refusal = " ".join(exc.messages)
        modeladmin.message_user(request, refusal[:1].upper() + refusal[1:] + ".", messages.ERROR)
        return form
    voided = sum(correction.voided for correction in corrections)
    modeladmin.message_user(request, f"{voided} result(s) voided.", messages.SUCCESS)
    return None


# --- Seasons: their boards, live, with rebuild and reconcile ------------------------------------


def _closed_refuse(season: Season) -> None:
    if season.status == SeasonStatus.CLOSED:
        raise ValidationError(
            "the season is closed: its boards left Redis at the close-out and its final "
            "standings are the truth; nothing queued"
        )


@confirmed_action(
    description="Rebuild the selected seasons' boards from PostgreSQL",
    explanation=(
        "Queues a rebuild of each board of each season, with its daily boards in Redis (the "
        "weekly boards built from them follow): each is recomputed from PostgreSQL and swapped "
        "in atomically; results ingested meanwhile are kept."
    ),
)
def rebuild_board(season: Season) -> str:
    _closed_refuse(season)
    boards = board_list(season_id=season.id)
    for board in boards:
        board_rebuild_task.delay(board_id=board.id, reason="admin")
    return (
        f"season {season.id}: rebuild of {len(boards)} board(s) with their daily and weekly "
        "boards queued (the worker runs it; see Rebuild runs)"
    )


@confirmed_action(
    description="Reconcile the selected seasons' boards with PostgreSQL",
    explanation=(
        "Queues a reconcile of each board of each season: its size and a sample of scores are "
        "compared with PostgreSQL, the drift is recorded (see Reconcile runs) and, if any, the "
        "board is rebuilt."
    ),
)
def reconcile_boards(season: Season) -> str:
    _closed_refuse(season)
    boards = board_list(season_id=season.id)
    for board in boards:
        board_reconcile_task.delay(board_id=board.id)
    return (
        f"season {season.id}: reconcile of {len(boards)} board(s) queued (the worker runs it; "
        "see Reconcile runs)"
    )


class PlayerSearchMixin(admin.ModelAdmin):
    """A player id searched through the table's (board, player_id) index, every board named
    (``rows_of_player_on_every_board``): ``=player_id`` alone reads the whole table, which
    grows with play. ``player_via``: the relation that holds the player, if not the row."""

    player_via = ""

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        term = search_term.strip()
        if term.isascii() and term.isdigit() and len(term) < 20:
            found = rows_of_player_on_every_board(
                queryset=queryset, player_id=int(term), via=self.player_via
            )
            return found, False
        return super().get_search_results(request, queryset, search_term)


class BoardForm(forms.ModelForm):
    """A board row of the season page. What the encoded scores depend on is read-only once the
    board has results; writes go through the board services (they fix the codec split)."""

    # Written as create_board's --tiebreak arguments: "kills:desc, deaths:asc".
    tiebreak_columns = forms.CharField(
        required=False,
        label="Tie-break columns",
        help_text="Ranked after points, in order: name:desc or name:asc, comma-separated "
        "(up to 3).",
    )

    class Meta:
        model = Board
        fields = (
            "slug",
            "name",
            "order",
            "rule",
            "time_resolution_seconds",
            "keeps_metadata",
            "tiebreak_columns",
            "cohort_size",
            "rank_events",
            "event_top_n",
            "join_required",
            "max_size",
            "max_attempts",
        )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.initial["tiebreak_columns"] = ", ".join(map(str, self.instance.tiebreaks))
        self._scored = self.instance.pk is not None and self.instance.match_results.exists()
        if self._scored:
            for field in SCORE_FIELDS:
                self.fields[field].disabled = True
                self.fields[field].help_text = "fixed: the board has results"

    def clean_event_top_n(self) -> int:
        top_n = self.cleaned_data["event_top_n"]
        try:
            return event_top_n_check(top_n)
        except ValidationError as exc:
            raise forms.ValidationError(exc.messages) from exc

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get(DELETION_FIELD_NAME) and self.instance.pk is not None:
            refusal = self._deletion_refusal()
            if refusal:
                # Refused before Django's own check, which would load every protected row (a
                # board's results: millions) to list them in its message.
                data[DELETION_FIELD_NAME] = False
                raise forms.ValidationError(refusal)
        try:
            tournament_options_check(
                join_required=bool(data.get("join_required")),
                max_size=data.get("max_size"),
                max_attempts=data.get("max_attempts"),
            )
        except ValidationError as exc:
            raise forms.ValidationError(exc.messages) from exc
        return data

    def _deletion_refusal(self) -> str | None:
        if self.instance.slug == MAIN_BOARD:
            return (
                "The main board cannot be deleted: every season has one (the /leaderboard/ "
                "paths and results without a board mean it)."
            )
        if self._scored:
            return (
                f"Board {self.instance.slug} has results and cannot be deleted: its results "
                "stay the truth its standings, history and rebuilds are made from."
            )
        return None

    def clean_tiebreak_columns(self) -> list[dict[str, str]]:
        text = self.cleaned_data.get("tiebreak_columns") or ""
        try:
            columns = [
                tiebreak_spec_parse(part.strip()) for part in text.split(",") if part.strip()
            ]
            return tiebreak_columns_json(columns)
        except TiebreakSpecError as exc:
            raise forms.ValidationError(str(exc)) from exc

    def _post_clean(self) -> None:
        # time_bits is the service's to compute: skip the model's full_clean here (the service
        # runs it with every field set).
        pass


# Frozen once the season is closed, pruned results or not (ClosedSeasonFrozenInline).
class BoardInline(ClosedSeasonFrozenInline, admin.TabularInline):
    model = Board
    form = BoardForm
    extra = 0
    fields = (
        "slug",
        "name",
        "order",
        "rule",
        "time_resolution_seconds",
        "keeps_metadata",
        "tiebreak_columns",
        "cohort_size",
        "cohorts",
        "rank_events",
        "event_top_n",
        "join_required",
        "max_size",
        "max_attempts",
        "tournament",
        "league",
        "time_bits",
    )
    readonly_fields = ("cohorts", "tournament", "league", "time_bits")
    show_change_link = False

    @admin.display(description="League")
    def league(self, obj: Board) -> str:
        if obj.pk is None or not obj.tiers:
            return "-"
        state = "; cohorts wait for the previous season's close-out" if obj.league_waiting else ""
        return (
            f"{' < '.join(obj.tiers)}: {obj.promote_percent}% up, "
            f"{obj.relegate_percent}% down{state}"
        )

    @admin.display(description="Participants")
    def tournament(self, obj: Board) -> SafeString | str:
        if obj.pk is None or not obj.join_required:
            return "-"
        seats = f"{obj.participants}" + (f"/{obj.max_size}" if obj.max_size else "")
        url = reverse("admin:leaderboard_participant_changelist") + f"?board__id__exact={obj.pk}"
        return format_html('<a href="{}">{} joined</a>', url, seats)

    @admin.display(description="Cohorts")
    def cohorts(self, obj: Board) -> str:
        if obj.pk is None or obj.cohort_size is None:
            return "-"
        summary = board_cohorts_summary(board_id=obj.pk)
        if not summary.cohorts:
            return "none yet"
        return (
            f"{summary.cohorts} ({summary.players} players; "
            f"newest {summary.last_members}/{obj.cohort_size})"
        )


if TYPE_CHECKING:
    _SeasonAdmin = SeasonAdminBase
else:
    _SeasonAdmin = object


class SeasonForm(forms.ModelForm):
    """The season page's own fields. A new end must fit every board's time bits
    (``season_end_check``): refused here, with the end each board can take, rather than let a
    later result rank wrongly."""

    class Meta:
        model = Season
        fields = ("id", "name", "starts_at", "ends_at")

    def clean(self) -> dict[str, Any] | None:
        data = super().clean() or {}
        ends_at = data.get("ends_at")
        if self.instance.pk is not None and ends_at is not None and "ends_at" in self.changed_data:
            try:
                season_end_check(season_id=self.instance.pk, ends_at=ends_at)
            except ValidationError as exc:
                self.add_error("ends_at", exc)
        return data


class SeasonBoardsMixin(_SeasonAdmin):
    """The Season admin's boards: writes of the ``BoardInline`` rows through the board
    services, the main board a season always has, and the live boards read-only on the page.
    Listed before ``seasons.admin.SeasonAdminBase`` in the assembled admin's bases."""

    _live_fields: tuple[str, ...] = ("live_boards",)
    form = SeasonForm

    def deletion_refusals(self, *, seasons: list[Season]) -> list[str]:
        refusals = super().deletion_refusals(seasons=seasons)
        scored = seasons_with_results(season_ids=[season.pk for season in seasons])
        refusals += [
            f"Season {season_id} has match results and cannot be deleted: they are the truth "
            "its boards, standings and history are made from."
            for season_id in sorted(scored)
        ]
        return refusals

    def save_model(self, request: HttpRequest, obj: Season, form: Any, change: bool) -> None:
        if change and "ends_at" in form.changed_data:
            # Checked again with the boards locked, and fitted (SeasonForm checked without).
            season_boards_fit(season_id=obj.pk, ends_at=obj.ends_at)
        super().save_model(request, obj, form, change)

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        if formset.model is not Board:
            super().save_formset(request, form, formset, change)
            return
        season = form.instance
        # What formset.save() would record, for the admin's change message.
        formset.new_objects, formset.changed_objects, formset.deleted_objects = [], [], []
        for board_form in formset.forms:
            data = getattr(board_form, "cleaned_data", None)
            if not data or not board_form.has_changed():
                continue
            board = board_form.instance
            if data.get("DELETE"):
                if board.pk is not None:
                    board.delete()
                    formset.deleted_objects.append(board)
                continue
            values = {
                field: data[field]
                for field in ("name", *SCORE_FIELDS, *EVENT_FIELDS, *TOURNAMENT_FIELDS)
            }
            values["tiebreaks"] = tiebreak_columns_parse(values.pop("tiebreak_columns"))
            if board.pk is None:
                formset.new_objects.append(board_create(season_id=season.id, **values))
            else:
                updated = board_update(board_id=board.pk, **values)
                formset.changed_objects.append((updated, board_form.changed_data))

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        form.save_m2m()
        # The boards first, then the main board if they made none, then the rest: a reward
        # tier left without a board on a season being added means the main board, which must
        # exist by the time the tier is saved.
        for formset in formsets:
            if formset.model is Board:
                self.save_formset(request, form, formset, change=change)
        self._main_board_ensure(season_id=form.instance.id)
        for formset in formsets:
            if formset.model is not Board:
                self.save_formset(request, form, formset, change=change)

    @staticmethod
    def _main_board_ensure(*, season_id: int) -> None:
        if not Board.objects.filter(season_id=season_id, slug=MAIN_BOARD).exists():
            # Every season has its main board (the /leaderboard/ paths and messages without a
            # "board" field mean it): a season created without one gets the default.
            board_create(season_id=season_id, slug=MAIN_BOARD, name="Main")

    def _overviews(self, obj: Season) -> list[BoardOverview]:
        cache = getattr(obj, "_board_overviews", None)
        if cache is None:
            cache = [
                board_overview_get(board=board, limit=100) for board in board_list(season_id=obj.id)
            ]
            obj._board_overviews = cache  # type: ignore[attr-defined]
        return cache

    @admin.display(description="Live boards (Redis)")
    def live_boards(self, obj: Season) -> SafeString:
        return mark_safe(  # noqa: S308 (the template escapes every value)
            render_to_string(
                "admin/leaderboard/board_top.html", {"overviews": self._overviews(obj)}
            )
        )


@admin.register(MatchResult)
class MatchResultAdmin(LargeTableAdmin):
    list_display = (
        "match_id",
        "player_id",
        "season",
        "board",
        "points",
        "achieved_at",
        "voided_at",
    )
    list_filter = ("season",)
    list_select_related = ("season", "board")
    search_fields = ("=player_id", "=match_id")
    actions = (void_match_results,)

    # A result is never written here: a void (the action, through match_result_void) is the
    # one change staff make, and it queues the boards' correction and the standings' review;
    # an edited or deleted row would leave Redis, the standings and the audit trail behind.
    # The change permission is asked of the list alone, for the action.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and super().has_change_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[MatchResult], search_term: str
    ) -> tuple[QuerySet[MatchResult], bool]:
        term = search_term.strip()
        if term.isascii() and term.isdigit() and len(term) < 20:
            # A player id: through the player index (a plain player_id filter reads the table).
            return match_results_of_player(player_id=int(term), queryset=queryset), False
        return super().get_search_results(request, queryset, search_term)


class PlayerBanForm(forms.ModelForm):
    class Meta:
        model = PlayerBan
        fields = ("season", "player_id", "reason")

    def clean_player_id(self) -> int:
        # What player_ban refuses, refused here as a form error rather than a failed save.
        player_id = int(self.cleaned_data["player_id"])
        if player_id <= 0:
            raise ValidationError(f"player ids are positive integers, got {player_id}")
        return player_id


@admin.register(PlayerBan)
class PlayerBanAdmin(admin.ModelAdmin):
    form = PlayerBanForm
    list_display = ("player_id", "season", "reason", "created_by", "created_at")
    list_filter = ("season",)
    list_select_related = ("season", "created_by")
    search_fields = ("=player_id", "reason")
    fields = ("season", "player_id", "reason")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # A ban is created or lifted, not edited: the boards follow those two events.
        return False

    def save_model(self, request: HttpRequest, obj: PlayerBan, form: Any, change: bool) -> None:
        user_id = getattr(request.user, "pk", None)
        correction = player_ban(
            season_id=obj.season_id,
            player_id=obj.player_id,
            reason=obj.reason,
            created_by_id=user_id,
        )
        # The admin goes on with `obj` (change log, redirect): make it the stored row.
        stored = PlayerBan.objects.get(season_id=obj.season_id, player_id=obj.player_id)
        obj.pk, obj.created_at, obj.created_by_id = (
            stored.pk,
            stored.created_at,
            stored.created_by_id,
        )
        obj._state.adding = False
        messages.info(request, _queue_board_corrections(correction))

    def delete_model(self, request: HttpRequest, obj: PlayerBan) -> None:
        correction = player_unban(season_id=obj.season_id, player_id=obj.player_id)
        messages.info(request, _queue_board_corrections(correction))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[PlayerBan]) -> None:
        for ban in queryset:
            self.delete_model(request, ban)


class CohortMemberInline(admin.TabularInline):
    model = CohortMember
    fields = ("player_id", "joined_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    ordering = ("player_id",)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Cohort)
class CohortAdmin(PlayerSearchMixin, LargeTableAdmin, ReadOnlyAdmin):
    """A board's cohorts and their members: assigned by ingestion, never edited (a player's
    cohort never changes)."""

    list_display = ("board", "number", "league_tier", "fill", "opened_at")
    list_filter = ("board__season",)
    list_select_related = ("board",)
    search_fields = ("=memberships__player_id",)
    search_help_text = "A player id: the cohorts the player is in."
    player_via = "memberships__"
    inlines = (CohortMemberInline,)

    @admin.display(description="Members")
    def fill(self, obj: Cohort) -> str:
        return f"{obj.members}/{obj.board.cohort_size}"

    @admin.display(description="League tier")
    def league_tier(self, obj: Cohort) -> str:
        return _tier_name(obj.board, obj.tier) or "-"


@admin.register(Participant)
class ParticipantAdmin(PlayerSearchMixin, LargeTableAdmin):
    """Who joined each tournament board (docs/tournaments.md). Players join through the API;
    staff look them up by player id and remove them (the seat frees up, their stored results
    stay counted, their next ones are refused as not_joined)."""

    list_display = ("player_id", "board", "season", "joined_at")
    list_filter = ("board__season", "board")
    list_select_related = ("board",)
    search_fields = ("=player_id",)
    search_help_text = "A player id: the boards the player joined."
    # The columns, not the board's own ordering (its season's start): no join and sort of the
    # whole table for a page.
    ordering = ("board_id", "joined_at", "player_id")
    fields = ("board", "player_id", "joined_at")
    readonly_fields = fields
    actions = ("remove_participants",)

    @admin.display(description="Season")
    def season(self, obj: Participant) -> int:
        return obj.board.season_id

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Joining is the API's (the board's seats and season are checked there).
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        # Removal goes through the service (the seat count follows): not the bulk delete.
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    @admin.action(description="Remove the selected participants", permissions=["delete"])
    def remove_participants(self, request: HttpRequest, queryset: QuerySet[Participant]) -> None:
        by_board: dict[int, list[int]] = {}
        for board_id, player_id in queryset.values_list("board_id", "player_id"):
            by_board.setdefault(board_id, []).append(player_id)
        removed = sum(
            board_players_remove(board_id=board_id, player_ids=players)
            for board_id, players in sorted(by_board.items())
        )
        self.message_user(request, f"{removed} participant(s) removed.", messages.SUCCESS)

    def delete_model(self, request: HttpRequest, obj: Participant) -> None:
        board_players_remove(board_id=obj.board_id, player_ids=[obj.player_id])

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Participant]) -> None:
        self.remove_participants(request, queryset)


@admin.register(RefusedResult)
class RefusedResultAdmin(PlayerSearchMixin, LargeTableAdmin, ReadOnlyAdmin):
    """The results tournament boards refused (not_joined, attempts_exhausted), each decided once
    and dead-lettered once; kept so a redelivery is never decided again."""

    list_display = (
        "board",
        "player_id",
        "match_id",
        "code",
        "kafka_partition",
        "kafka_offset",
        "refused_at",
        "dead_lettered_at",
    )
    list_filter = ("code", "board__season")
    list_select_related = ("board",)
    search_fields = ("=player_id", "=match_id")


def _tier_name(board: Board, tier: int | None) -> str | None:
    if tier is None or not board.tiers:
        return None
    return board.tiers[min(tier, len(board.tiers) - 1)]


@admin.register(LeagueMovement)
class LeagueMovementAdmin(LargeTableAdmin, ReadOnlyAdmin):
    """Who moved where at each league close-out (decided with the final standings, never
    edited: the next season's cohorts are formed from them). Searched by player id."""

    list_display = (
        "board",
        "player_id",
        "tier_played",
        "cohort_rank",
        "movement",
        "next_tier_name",
    )
    list_filter = ("movement", "board__season__schedule", "board__season")
    list_select_related = ("board", "board__season")
    search_fields = ("=player_id",)
    search_help_text = "A player id: their movements, newest season first."
    ordering = ("-board_id", "player_id")

    @admin.display(description="Tier played")
    def tier_played(self, obj: LeagueMovement) -> str:
        return _tier_name(obj.board, obj.tier) or "-"

    @admin.display(description="Next tier")
    def next_tier_name(self, obj: LeagueMovement) -> str:
        return _tier_name(obj.board, obj.next_tier) or "-"


@admin.register(RebuildRun)
class RebuildRunAdmin(ReadOnlyAdmin):
    list_display = (
        "season",
        "board",
        "day",
        "status",
        "members",
        "delta_members",
        "overflowed_count",
        "reason",
        "started_at",
        "finished_at",
    )
    list_filter = ("status", "season")
    list_select_related = ("season", "board")


@admin.register(ReconcileRun)
class ReconcileRunAdmin(ReadOnlyAdmin):
    list_display = (
        "season",
        "board",
        "day",
        "checked_at",
        "redis_members",
        "expected_members",
        "sample_size",
        "mismatched_scores",
        "drift_found",
        "rebuilt",
    )
    list_filter = ("drift_found", "rebuilt", "season")
    list_select_related = ("season", "board")
