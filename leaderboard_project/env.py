"""The environment reader settings.py uses: django-environ, made strict.

django-environ alone reads ``DJANGO_DEBUG=ture`` as false, ``INGEST_POLL_TIMEOUT_MS=2OO`` as a
bare ValueError and ``1x5`` as the float 15. A typo in production must stop the process with
the variable's name instead, so every typed read here raises ImproperlyConfigured naming it.
An empty value counts as unset (``.env.example`` lists every variable, most of them empty, and
honcho loads a copied ``.env``).
"""

from __future__ import annotations

from typing import Any, ClassVar

import environ
from django.core.exceptions import ImproperlyConfigured


class StrictEnv(environ.Env):  # django-environ ships no type hints: its Env is Any here
    BOOLEAN_TRUE: ClassVar[frozenset[str]] = frozenset({"1", "true", "yes", "on"})
    BOOLEAN_FALSE: ClassVar[frozenset[str]] = frozenset({"0", "false", "no", "off"})

    def get_value(
        self,
        var: str,
        cast: Any = None,
        default: Any = environ.Env.NOTSET,
        parse_default: bool = False,
    ) -> Any:
        if self.ENVIRON.get(var) == "" and default is not environ.Env.NOTSET:
            return default
        try:
            return super().get_value(var, cast=cast, default=default, parse_default=parse_default)
        except ImproperlyConfigured:
            raise
        except (ValueError, TypeError) as exc:
            raise ImproperlyConfigured(
                f"{var}={self.ENVIRON.get(var)!r} is not a valid {_kind(cast)}"
            ) from exc

    @classmethod
    def parse_value(cls, value: Any, cast: Any) -> Any:
        if cast is bool and isinstance(value, str):
            word = value.strip().lower()
            if word in cls.BOOLEAN_TRUE:
                return True
            if word in cls.BOOLEAN_FALSE:
                return False
            raise ValueError(value)
        if cast is float and isinstance(value, str):
            # django-environ strips every non-digit first ("1x5" -> 15.0); take Python's reading.
            return float(value)
        return super().parse_value(value, cast)

    def list(self, var: str, cast: Any = None, default: Any = environ.Env.NOTSET) -> list[str]:
        """Comma-separated, items stripped, empty items dropped ("a, b," -> ["a", "b"])."""
        raw = self.str(var, default=default)
        if isinstance(raw, list):
            return raw
        return [item.strip() for item in raw.split(",") if item.strip()]


def _kind(cast: Any) -> str:
    if cast is bool:
        return "boolean (use 1/0, true/false, yes/no, on/off)"
    if cast is int:
        return "integer"
    if cast is float:
        return "number"
    return "value"
