"""The board page's query string (``leaderboard.views.season_board_page``).

Checked with the read API's own rules (leaderboard/serializers.py), so a rank, a day, a week or
a player id the API refuses is refused here too, with the same words. A field that fails falls
back to its default: the page still shows a board, says what was wrong, and answers 400.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any, Literal, cast

from django import forms
from rest_framework.exceptions import ValidationError as ApiValidationError

from .serializers import MAX_START, IdField, StrictIntegerField, day_parse, iso_week_parse

Period = Literal["season", "daily", "weekly"]
PERIODS: tuple[Period, ...] = ("season", "daily", "weekly")

# Built once: the fields hold no per-request state.
_START = StrictIntegerField(min_value=1, max_value=MAX_START)
_PLAYER_ID = IdField()


def iso_week_label(iso_year: int, iso_week: int) -> str:
    return f"{iso_year:04d}-W{iso_week:02d}"


@dataclass(frozen=True, slots=True)
class BoardPageQuery:
    period: Period
    # 1-based rank the season's list starts at; 1 on a day's or a week's list.
    start: int
    # The day listed (daily), else the season's current day.
    day: date
    # The season's current day (the Daily and Weekly tabs link to it and its ISO week).
    default_day: date
    iso_year: int
    iso_week: int
    player_id: int | None
    # The lookup as typed, shown back in the search box (also when it was refused).
    player_query: str

    @property
    def week(self) -> str:
        return iso_week_label(self.iso_year, self.iso_week)


class _QueryText(forms.Field):
    """A query parameter as the text it is; the form's clean_<name> methods parse it."""

    def __init__(self, *, strip: bool = True) -> None:
        super().__init__(required=False)
        self.strip = strip

    def to_python(self, value: Any) -> str:
        text = "" if value is None else str(value)
        return text.strip() if self.strip else text


def _api_message(exc: ApiValidationError) -> str:
    detail: Any = exc.detail
    if isinstance(detail, dict):
        detail = next(iter(detail.values()))
    if isinstance(detail, list):
        detail = detail[0]
    return str(detail)


class BoardPageForm(forms.Form):
    """``?period=season|daily|weekly``, ``?start=`` (season), ``?day=`` (daily), ``?week=``
    (weekly), ``?player=``. ``default_day`` is the season's current day: an empty ``day`` or
    ``week`` means it (or its ISO week)."""

    # Not stripped: the period is a word from the page's own links, never typed.
    period = _QueryText(strip=False)
    start = _QueryText()
    day = _QueryText()
    week = _QueryText()
    player = _QueryText()

    def __init__(self, data: Any, *, default_day: date) -> None:
        super().__init__(data)
        self.default_day = default_day

    def _period(self) -> Period:
        # An invalid period is refused and the season shown: its start is read as the season's.
        return cast(Period, self.cleaned_data.get("period", "season"))

    def clean_period(self) -> Period:
        value: str = self.cleaned_data["period"] or "season"
        if value not in PERIODS:
            raise forms.ValidationError(
                f"{value[:20]!r} is not a period (season, daily or weekly)."
            )
        return value

    def clean_start(self) -> int:
        value: str = self.cleaned_data["start"]
        if self._period() != "season" or not value:
            return 1
        try:
            return int(_START.run_validation(value))
        except ApiValidationError as exc:
            raise forms.ValidationError(f"Rank: {_api_message(exc)}") from None

    def clean_day(self) -> date:
        value: str = self.cleaned_data["day"]
        if self._period() != "daily" or not value:
            return self.default_day
        try:
            return day_parse(value)
        except ApiValidationError as exc:
            raise forms.ValidationError(f"Day: {_api_message(exc)}") from None

    def clean_week(self) -> tuple[int, int]:
        value: str = self.cleaned_data["week"]
        if self._period() != "weekly" or not value:
            return _iso_week_of(self.default_day)
        try:
            return iso_week_parse(value)
        except ApiValidationError as exc:
            raise forms.ValidationError(f"Week: {_api_message(exc)}") from None

    def clean_player(self) -> int | None:
        value: str = self.cleaned_data["player"]
        if not value:
            return None
        try:
            return int(_PLAYER_ID.to_internal_value(value))
        except ApiValidationError:
            raise forms.ValidationError(
                f"{value[:40]!r} is not a player id (a positive integer)."
            ) from None

    def messages(self) -> list[str]:
        """What was refused, one sentence per parameter, in the order of the fields."""
        return [str(message) for messages in self.errors.values() for message in messages]

    def page_query(self) -> BoardPageQuery:
        """The query to show: each refused parameter replaced by its default."""
        self.is_valid()
        data = self.cleaned_data
        iso_year, iso_week = data.get("week") or _iso_week_of(self.default_day)
        raw_player = self.data.get("player", "")
        return BoardPageQuery(
            period=data.get("period", "season"),
            start=data.get("start", 1),
            day=data.get("day", self.default_day),
            default_day=self.default_day,
            iso_year=iso_year,
            iso_week=iso_week,
            player_id=data.get("player"),
            player_query=str(raw_player).strip(),
        )


def _iso_week_of(day: date) -> tuple[int, int]:
    iso_year, iso_week, _ = day.isocalendar()
    return iso_year, iso_week
