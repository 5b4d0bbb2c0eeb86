"""Production settings, checked the way a deployment starts: fresh processes, real env."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PRODUCTION_ENV = {
    "DJANGO_DEBUG": "false",
    "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
    "DJANGO_ALLOWED_HOSTS": "leaderboard.example.com",
    "DJANGO_SECURE_SSL_REDIRECT": "true",
    "DJANGO_SECURE_HSTS_SECONDS": "31536000",
    "DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS": "true",
    "DJANGO_SECURE_HSTS_PRELOAD": "true",
    "DJANGO_SESSION_COOKIE_SECURE": "true",
    "DJANGO_CSRF_COOKIE_SECURE": "true",
    "DJANGO_SECURE_PROXY_SSL_HEADER": "HTTP_X_FORWARDED_PROTO",
}


def _manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=base | env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_production_settings() -> None:
    done = _manage("check", "--deploy", "--fail-level", "WARNING", **PRODUCTION_ENV)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNINGS" not in done.stderr + done.stdout
    assert "System check identified no issues" in done.stdout


def test_check_deploy_warns_with_the_local_defaults() -> None:
    """The flags above are what makes it clean: without them the same check fails."""
    env = {"DJANGO_DEBUG": "false", "DJANGO_SECRET_KEY": PRODUCTION_ENV["DJANGO_SECRET_KEY"]}
    done = _manage("check", "--deploy", "--fail-level", "WARNING", **env)
    assert done.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in done.stderr


def test_debug_off_with_the_development_secret_refuses_to_start() -> None:
    done = _manage("check")  # DJANGO_DEBUG unset: off; DJANGO_SECRET_KEY unset: the dev key
    assert done.returncode != 0
    assert "DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is off" in done.stderr


def test_debug_defaults_to_off() -> None:
    done = _manage(
        "shell",
        "-c",
        "from django.conf import settings; print(settings.DEBUG)",
        DJANGO_SECRET_KEY=PRODUCTION_ENV["DJANGO_SECRET_KEY"],
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "False"


def test_a_malformed_value_stops_the_process_naming_it() -> None:
    done = _manage("check", DJANGO_DEBUG="true", DJANGO_SECURE_HSTS_SECONDS="one year")
    assert done.returncode != 0
    assert "DJANGO_SECURE_HSTS_SECONDS='one year' is not a valid integer" in done.stderr


def test_a_malformed_throttle_rate_stops_the_process_naming_it() -> None:
    """It was parsed at the first throttled request: every public read answered 500 while
    /healthz stayed green."""
    done = _manage("check", DJANGO_DEBUG="true", API_ANON_THROTTLE_RATE="6000/week")
    assert done.returncode != 0
    assert "API_ANON_THROTTLE_RATE='6000/week'" in done.stderr


def test_a_history_retention_of_no_days_is_refused() -> None:
    """0 pruned every ended season's history each hour (the results' 0 means keep for good)."""
    done = _manage("check", DJANGO_DEBUG="true", HISTORY_RETENTION_DAYS="0")
    assert done.returncode != 0
    assert "HISTORY_RETENTION_DAYS=0" in done.stderr
