"""Django settings.

This module is the only place that reads the process environment; everything else
reads ``django.conf.settings`` at call time. Every variable is documented in
``.env.example``. Defaults point at the local services that ``make services`` starts.
"""

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def _env(name: str, default: str) -> str:
    return os.environ.get(name, default)


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use 1/0, true/false)")


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from exc


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number") from exc


def _env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in _env(name, default).split(",") if item.strip()]


# --- Core -------------------------------------------------------------------------------------

_INSECURE_DEV_KEY = "django-insecure-local-development-only-do-not-use-in-production"
DEBUG = _env_bool("DJANGO_DEBUG", True)
SECRET_KEY = _env("DJANGO_SECRET_KEY", _INSECURE_DEV_KEY)
if not DEBUG and SECRET_KEY == _INSECURE_DEV_KEY:
    raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is off")

ALLOWED_HOSTS = _env_list("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = _env_list("DJANGO_CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "django_celery_beat",
    # The apps, lowest layer first (the import contracts in pyproject.toml hold them to it).
    "seasons",
    "leaderboard",
    "ingestion",
    "closeout",
    # The project itself, for its management commands (demo data, the periodic schedule).
    "leaderboard_project",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "leaderboard_project.urls"
WSGI_APPLICATION = "leaderboard_project.wsgi.application"
# The API contract has no trailing slashes; don't redirect /api/x to /api/x/.
APPEND_SLASH = False

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- PostgreSQL (source of truth) ----------------------------------------------------------------

DATABASE_URL = _env("DATABASE_URL", "postgres://leaderboard:leaderboard@127.0.0.1:5432/leaderboard")
DATABASES = {
    "default": dj_database_url.parse(
        DATABASE_URL,
        conn_max_age=_env_int("DATABASE_CONN_MAX_AGE", 60),
        conn_health_checks=True,
    )
}
# Lets several checkouts run their test suites against one server at once.
_test_db_name = _env("DJANGO_TEST_DATABASE_NAME", "")
if _test_db_name:
    DATABASES["default"]["TEST"] = {"NAME": _test_db_name}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis ---------------------------------------------------------------------------------------

# Boards (sorted sets) live here. Redis is an index rebuilt from PostgreSQL, never the truth.
REDIS_URL = _env("REDIS_URL", "redis://127.0.0.1:6379/0")
CACHE_URL = _env("CACHE_URL", "redis://127.0.0.1:6379/1")
CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": CACHE_URL,
        "KEY_PREFIX": _env("CACHE_KEY_PREFIX", "lbcache"),
        "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
    },
    # Raw access to the boards' Redis through django-redis's pooled connection
    # (leaderboard.redis.get_board_redis); not used as a cache.
    "boards": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": REDIS_URL,
        "OPTIONS": {
            "CLIENT_CLASS": "django_redis.client.DefaultClient",
            "SOCKET_CONNECT_TIMEOUT": 2,
            "SOCKET_TIMEOUT": _env_int("REDIS_SOCKET_TIMEOUT", 5),
            "CONNECTION_POOL_KWARGS": {"max_connections": _env_int("REDIS_MAX_CONNECTIONS", 64)},
        },
    },
}
# Every board key starts with this; tests give each test its own prefix.
LEADERBOARD_KEY_PREFIX = _env("LEADERBOARD_KEY_PREFIX", "lb")
# Daily boards expire this many days after their day ends; the one daily expiry, for ingestion
# and rebuilds alike. 15 days cover the current and the previous ISO week, which the weekly
# boards are built from and the reconcile compares.
LEADERBOARD_DAILY_TTL_DAYS = _env_int("LEADERBOARD_DAILY_TTL_DAYS", 15)

# --- Kafka ---------------------------------------------------------------------------------------

KAFKA_BOOTSTRAP_SERVERS = _env_list("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
# The test suite's Kafka outage: the broker's FAULTS listener (infra/kafka/server.properties
# .template) and the address it advertises, where the suite runs a TCP proxy it can cut.
KAFKA_FAULTS_LISTENER = _env("KAFKA_FAULTS_LISTENER", "127.0.0.1:9094")
KAFKA_FAULTS_PROXY = _env("KAFKA_FAULTS_PROXY", "127.0.0.1:9095")
KAFKA_MATCH_RESULTS_TOPIC = _env("KAFKA_MATCH_RESULTS_TOPIC", "match-results")
KAFKA_DEAD_LETTER_TOPIC = _env("KAFKA_DEAD_LETTER_TOPIC", f"{KAFKA_MATCH_RESULTS_TOPIC}.dlq")
KAFKA_CONSUMER_GROUP = _env("KAFKA_CONSUMER_GROUP", "leaderboard-ingest")
KAFKA_TOPIC_PARTITIONS = _env_int("KAFKA_TOPIC_PARTITIONS", 4)

# --- Ingestion consumer (ingestion/consumer.py, docs/ingestion.md) ------------------------------

# Records per poll: one PostgreSQL statement and one Redis round trip per batch, so bigger
# batches amortise both; the batch is also what a crash replays.
INGEST_MAX_POLL_RECORDS = _env_int("INGEST_MAX_POLL_RECORDS", 5000)
INGEST_POLL_TIMEOUT_MS = _env_int("INGEST_POLL_TIMEOUT_MS", 200)
# A log line and a stats write every this many seconds.
INGEST_STATS_INTERVAL_SECONDS = _env_int("INGEST_STATS_INTERVAL_SECONDS", 10)
# Retry delay cap while PostgreSQL, Redis or Kafka is unreachable (doubling from 0.1 s).
INGEST_BACKOFF_MAX_SECONDS = _env_int("INGEST_BACKOFF_MAX_SECONDS", 10)
# Kafka static membership id of this consumer process (e.g. the pod name); empty = dynamic.
INGEST_GROUP_INSTANCE_ID = _env("INGEST_GROUP_INSTANCE_ID", "")

# --- Celery --------------------------------------------------------------------------------------

CELERY_BROKER_URL = _env("CELERY_BROKER_URL", "redis://127.0.0.1:6379/2")
CELERY_RESULT_BACKEND = _env("CELERY_RESULT_BACKEND", "") or None
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = _env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = "UTC"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# The queue tasks go to and workers read by default (a test run uses its own).
CELERY_TASK_DEFAULT_QUEUE = _env("CELERY_TASK_DEFAULT_QUEUE", "celery")

# --- DRF -----------------------------------------------------------------------------------------

REST_FRAMEWORK = {
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Leaderboard API",
    "DESCRIPTION": "Real-time season leaderboards: rankings, friends, daily and weekly boards.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
}

# --- Read API ----------------------------------------------------------------------------------


# Anonymous clients' request rate per IP ("6000/min"; "off" disables the throttle).
API_ANON_THROTTLE_RATE = _env("API_ANON_THROTTLE_RATE", "6000/min")

# --- Input hardening (issue 11: trusted client address, request body cap, future results) ----
# Proxies in front of the web processes that each append the address they saw to
# X-Forwarded-For. 0: the header is ignored and the throttle keys on REMOTE_ADDR; N: on the N-th
# entry from the right. Never more than the proxies really there, or clients pick their key.
API_TRUSTED_PROXY_COUNT = _env_int("API_TRUSTED_PROXY_COUNT", 0)
# Largest request body the HTTP ingestion door reads (bytes); past it, 413 before parsing.
# 1,000 results (the per-request maximum) take about 150 KB; 1 MiB leaves room for formatting.
INGEST_HTTP_MAX_BODY_BYTES = _env_int("INGEST_HTTP_MAX_BODY_BYTES", 1024 * 1024)
# A result whose achievedAt is later than now plus this many seconds is rejected as
# achieved_in_future (dead-lettered by the consumer, a 400 item at the HTTP door): game
# servers' clocks drift a little, but a result from the future would win every tie.
INGEST_MAX_FUTURE_SKEW_SECONDS = _env_int("INGEST_MAX_FUTURE_SKEW_SECONDS", 300)
# --- end of input hardening ------------------------------------------------------------------
# How long each process trusts its memo of a season (the hot endpoints make no SQL query).
LEADERBOARD_SEASON_CACHE_SECONDS = _env_float("LEADERBOARD_SEASON_CACHE_SECONDS", 5.0)
# Each process re-reads a season's top-list snapshot from Redis at most this often.
LEADERBOARD_TOP_SNAPSHOT_READ_INTERVAL_SECONDS = _env_float(
    "LEADERBOARD_TOP_SNAPSHOT_READ_INTERVAL_SECONDS", 1.0
)
# A snapshot older than this is ignored and the top list is read from the live board.
LEADERBOARD_TOP_SNAPSHOT_MAX_AGE_SECONDS = _env_float(
    "LEADERBOARD_TOP_SNAPSHOT_MAX_AGE_SECONDS", 3.0
)
# Expiry of the stored snapshot: a season that stops being refreshed drops it.
LEADERBOARD_TOP_SNAPSHOT_TTL_SECONDS = _env_int("LEADERBOARD_TOP_SNAPSHOT_TTL_SECONDS", 60)
# Expiry of a weekly board built from the daily boards.
LEADERBOARD_WEEKLY_BOARD_TTL_SECONDS = _env_int(
    "LEADERBOARD_WEEKLY_BOARD_TTL_SECONDS", 14 * 24 * 3600
)

# --- i18n, static --------------------------------------------------------------------------------

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(_env("DJANGO_STATIC_ROOT", str(BASE_DIR / ".local" / "static")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# --- Logging -------------------------------------------------------------------------------------

LOG_LEVEL = _env("LOG_LEVEL", "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
    },
    "filters": {
        # kafka-python logs each failed reconnect (several a second while a broker is away):
        # one line per kind and interval is kept (leaderboard_project/logfilters.py).
        "kafka_repeats": {
            "()": "leaderboard_project.logfilters.RepeatedRecordsFilter",
            "loggers": ["kafka"],
            "interval_seconds": _env_float("KAFKA_LOG_REPEAT_SECONDS", 60.0),
        },
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
            "filters": ["kafka_repeats"],
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "kafka": {"level": _env("KAFKA_LOG_LEVEL", "WARNING")},
        "django.db.backends": {"level": "INFO"},
    },
}

# --- Seasons: close-out -------------------------------------------------------------------------

# How many final entries a close-out copies into PostgreSQL (and the standings API serves).
FINAL_STANDINGS_SIZE = _env_int("FINAL_STANDINGS_SIZE", 1000)
# Seconds between a season's switch to "closing" and the moment its close-out records the
# topic's end offsets to drain: results game servers publish just after the end still count.
SEASON_CLOSE_GRACE_SECONDS = _env_int("SEASON_CLOSE_GRACE_SECONDS", 30)
# How long one close-out run waits for the consumer group to commit up to the topic's end
# offsets recorded when the drain began; past it, it finalizes nothing and says what lags.
SEASON_CLOSE_DRAIN_TIMEOUT_SECONDS = _env_float("SEASON_CLOSE_DRAIN_TIMEOUT_SECONDS", 600.0)
