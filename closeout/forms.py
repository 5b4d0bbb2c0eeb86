"""The schedule page's query (``?page=2`` of its archive)."""

from __future__ import annotations

from django import forms


class ArchivePageForm(forms.Form):
    page = forms.IntegerField(min_value=1, max_value=100_000, required=False)

    def page_number(self) -> int:
        """The page asked for; 1 when absent or refused (the page says why)."""
        if self.is_valid():
            return self.cleaned_data["page"] or 1
        return 1

    def messages(self) -> list[str]:
        return [f"{name}: {' '.join(map(str, errors))}" for name, errors in self.errors.items()]
