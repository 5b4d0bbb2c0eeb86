"""Django settings: production's, and every process's unless DJANGO_SETTINGS_MODULE says otherwise.

The settings modules are the only places that read the process environment (through
``leaderboard_project.env``); everything else reads ``django.conf.settings`` at call time. Every
variable is documented in ``.env.example``. Defaults point at the local services that ``make
services`` starts. Two modules build on this one, each chosen by DJANGO_SETTINGS_MODULE:
``local_clusters`` (the local Redis Cluster and Kafka brokers of devservices: ``make run``,
the benchmarks) and ``settings_test`` (the test suite, through pyproject.toml).
"""

import importlib.metadata
import ipaddress
from datetime import timedelta
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from .env import StrictEnv
from .schedules import ROUTINE_TASKS

BASE_DIR = Path(__file__).resolve().parent.parent

env = StrictEnv()


# --- Core -------------------------------------------------------------------------------------

_INSECURE_DEV_KEY = "django-insecure-local-development-only-do-not-use-in-production"
# Off unless asked for: a debug page shows settings (DATABASE_URL with its password) to anyone
# who triggers a 500. `make run` turns it on for the local demo.
DEBUG = env.bool("DJANGO_DEBUG", default=False)
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default=_INSECURE_DEV_KEY)
# Sessions, CSRF tokens and password resets are signed with it: every process refuses to start
# with the published development key unless DEBUG says this is a local machine.
if not DEBUG and SECRET_KEY == _INSECURE_DEV_KEY:
    raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is off")

ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default="localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default="")

# --- HTTPS (production) ---------------------------------------------------------------------------
# Off by default: the local demo serves plain HTTP on loopback. Behind TLS turn them on;
# `manage.py check --deploy` is clean with DEBUG off, a real secret and these set.
SECURE_SSL_REDIRECT = env.bool("DJANGO_SECURE_SSL_REDIRECT", default=False)
# Load balancers and Prometheus probe these over plain HTTP inside the network.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$", r"^metrics\.json$"]
# Start small (300) and raise it once HTTPS is known good: browsers remember it that long.
SECURE_HSTS_SECONDS = env.int("DJANGO_SECURE_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("DJANGO_SECURE_HSTS_PRELOAD", default=False)
SESSION_COOKIE_SECURE = env.bool("DJANGO_SESSION_COOKIE_SECURE", default=False)
CSRF_COOKIE_SECURE = env.bool("DJANGO_CSRF_COOKIE_SECURE", default=False)
# The request header a TLS-terminating proxy sets to "https" (e.g. HTTP_X_FORWARDED_PROTO).
# Only behind a proxy that always sets it and strips it from clients: otherwise any client
# could claim HTTPS. Empty: the connection itself decides.
_proxy_ssl_header = env.str("DJANGO_SECURE_PROXY_SSL_HEADER", default="")
SECURE_PROXY_SSL_HEADER = (_proxy_ssl_header, "https") if _proxy_ssl_header else None

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
    # Swagger UI's and Redoc's files, served from our static files (no CDN at /api/docs).
    "drf_spectacular_sidecar",
    # Admin login lockout (AXES_* below).
    "axes",
    # The apps, lowest layer first (the import contracts in pyproject.toml hold them to it).
    "seasons",
    "players",
    "leaderboard",
    "ingestion",
    "closeout",
    "webhooks",
    # The project itself: its management commands (demo data, the periodic schedule) and the
    # Season admin it assembles from the apps' pieces (leaderboard_project/admin.py).
    "leaderboard_project",
]

MIDDLEWARE = [
    # First: the latency it records covers every other middleware, static files included.
    "leaderboard_project.metrics.PrometheusHttpMiddleware",
    # Next: a path with a control character is a 404 before anything else reads the path.
    "leaderboard_project.middleware.ControlCharacterPathMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # PostgreSQL or Redis unavailable, or a board Redis lost, in any view: a 503 with
    # Retry-After, not a 500 (leaderboard/unavailable.py).
    "leaderboard_project.middleware.UnavailableMiddleware",
    # Last, per django-axes: it answers the lockout response for a login its backend refused.
    "axes.middleware.AxesMiddleware",
]

# --- Admin login lockout (django-axes) -----------------------------------------------------------

# Axes first: it refuses a locked-out login before any password is checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Failed logins of one username from one address before both are locked out (429).
AXES_FAILURE_LIMIT = env.int("AXES_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("AXES_COOLOFF_MINUTES", default=15))
# Username and address together: a guesser cannot lock a staff member out from elsewhere.
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
# The address the throttle and the operators' views trust (leaderboard.throttling.client_address):
# REMOTE_ADDR, or behind API_TRUSTED_PROXY_COUNT proxies the X-Forwarded-For entry the outermost
# of them wrote. REMOTE_ADDR alone is the proxy's for every client behind it: one guesser would
# lock a staff member out from everywhere.
AXES_CLIENT_IP_CALLABLE = "leaderboard_project.access.request_client_address"
# Admin messages wait in the session (PostgreSQL), not in a cookie: the one that shows a new
# game-server token or webhook secret once would otherwise travel in a signed, unencrypted cookie.
MESSAGE_STORAGE = "django.contrib.messages.storage.session.SessionStorage"

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

DATABASE_URL = env.str(
    "DATABASE_URL", default="postgres://leaderboard:leaderboard@127.0.0.1:5432/leaderboard"
)
DATABASES = {
    "default": {
        **env.db_url_config(DATABASE_URL),
        "CONN_MAX_AGE": env.int("DATABASE_CONN_MAX_AGE", default=60),
        "CONN_HEALTH_CHECKS": True,
    }
}
# Seconds to wait for a PostgreSQL connection. libpq waits forever by default: an unreachable
# (not refusing) server would hang every request that needs it instead of answering 503.
DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
    "connect_timeout", env.int("DATABASE_CONNECT_TIMEOUT", default=3)
)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis ---------------------------------------------------------------------------------------

# Boards (sorted sets) live here. Redis is an index rebuilt from PostgreSQL, never the truth.
REDIS_URL = env.str("REDIS_URL", default="redis://127.0.0.1:6379/0")
CACHE_URL = env.str("CACHE_URL", default="redis://127.0.0.1:6379/1")
CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": CACHE_URL,
        "KEY_PREFIX": env.str("CACHE_KEY_PREFIX", default="lbcache"),
        "OPTIONS": {
            "CLIENT_CLASS": "django_redis.client.DefaultClient",
            # The throttle's counters live here, on every API request: a cache Redis that
            # hangs (rather than refuses) costs a request this long at most (the client's
            # default let it wait 5 s), and then the throttle lets it through
            # (leaderboard/throttling.py).
            "SOCKET_CONNECT_TIMEOUT": 1,
            "SOCKET_TIMEOUT": env.float("CACHE_SOCKET_TIMEOUT", default=1.0),
        },
    },
    # Raw access to the boards' Redis through django-redis's pooled connection
    # (leaderboard.redis.get_board_redis); not used as a cache.
    "boards": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": REDIS_URL,
        "OPTIONS": {
            "CLIENT_CLASS": "django_redis.client.DefaultClient",
            "SOCKET_CONNECT_TIMEOUT": 2,
            "SOCKET_TIMEOUT": env.int("REDIS_SOCKET_TIMEOUT", default=5),
            "CONNECTION_POOL_KWARGS": {
                "max_connections": env.int("REDIS_MAX_CONNECTIONS", default=64)
            },
        },
    },
}
# Every board key starts with this; tests give each test its own prefix.
LEADERBOARD_KEY_PREFIX = env.str("LEADERBOARD_KEY_PREFIX", default="lb")
# Daily boards expire this many days after their day ends; the one daily expiry, for ingestion
# and rebuilds alike. 15 days cover the current and the previous ISO week, which the weekly
# boards are built from and the reconcile compares.
LEADERBOARD_DAILY_TTL_DAYS = env.int("LEADERBOARD_DAILY_TTL_DAYS", default=15)
# Boards up to this many players are reconciled in full (every score); larger ones by count
# and sample (leaderboard/services/reconcile.py).
RECONCILE_FULL_MAX_MEMBERS = env.int("RECONCILE_FULL_MAX_MEMBERS", default=200_000)

# --- Kafka ---------------------------------------------------------------------------------------

KAFKA_BOOTSTRAP_SERVERS = env.list("KAFKA_BOOTSTRAP_SERVERS", default="127.0.0.1:9092")
KAFKA_MATCH_RESULTS_TOPIC = env.str("KAFKA_MATCH_RESULTS_TOPIC", default="match-results")
KAFKA_DEAD_LETTER_TOPIC = env.str(
    "KAFKA_DEAD_LETTER_TOPIC", default=f"{KAFKA_MATCH_RESULTS_TOPIC}.dlq"
)
# Contract 0.3: player profiles (key = player id), consumed by the same consumer process as
# the match results (always; empty means the default, as everywhere); bad profiles go to their own
# dead-letter topic.
KAFKA_PLAYER_PROFILES_TOPIC = env.str("KAFKA_PLAYER_PROFILES_TOPIC", default="player-profiles")
KAFKA_PLAYER_PROFILES_DEAD_LETTER_TOPIC = env.str(
    "KAFKA_PLAYER_PROFILES_DEAD_LETTER_TOPIC", default=f"{KAFKA_PLAYER_PROFILES_TOPIC}.dlq"
)
# Contract 0.3: rank events (key = player id), published by the consumer before it commits each
# batch, by corrections and by the close-out (docs/events.md).
KAFKA_RANK_EVENTS_TOPIC = env.str("KAFKA_RANK_EVENTS_TOPIC", default="rank-events")
# The board stream (manage.py serve_board_stream): where the public pages open it ("" : they
# poll), how many streams it holds at once, and how long one lasts before the browser reconnects.
BOARD_STREAM_URL = env.str("BOARD_STREAM_URL", default="").rstrip("/")
BOARD_STREAM_MAX_CLIENTS = env.int("BOARD_STREAM_MAX_CLIENTS", default=5000)
# Streams open at once from one client (an address, an IPv6 client's /64, behind
# API_TRUSTED_PROXY_COUNT proxies what the outermost saw): past it 503, and that page polls
# (the API throttle's business), so one client cannot take every stream. Players behind one NAT
# share it: a page refused a stream still updates every second.
BOARD_STREAM_MAX_PER_CLIENT = env.int("BOARD_STREAM_MAX_PER_CLIENT", default=20)
BOARD_STREAM_MAX_SECONDS = env.float("BOARD_STREAM_MAX_SECONDS", default=600.0)
KAFKA_CONSUMER_GROUP = env.str("KAFKA_CONSUMER_GROUP", default="leaderboard-ingest")
KAFKA_TOPIC_PARTITIONS = env.int("KAFKA_TOPIC_PARTITIONS", default=4)

# --- Clusters (README "Running on clusters") -----------------------------------------------------

# Where the boards live: "single" (REDIS_URL, the default) or "cluster" (REDIS_CLUSTER_NODES,
# through redis-py's RedisCluster). Celery's broker and Django's cache stay on a standalone
# Redis in both modes (CELERY_BROKER_URL, CACHE_URL).
LB_REDIS_MODE = env.str("LB_REDIS_MODE", default="single").strip().lower()
if LB_REDIS_MODE not in {"single", "cluster"}:
    raise ImproperlyConfigured(f"LB_REDIS_MODE={LB_REDIS_MODE!r}: use 'single' or 'cluster'")
# Seed nodes (host:port, comma-separated) the cluster client discovers the rest from.
REDIS_CLUSTER_NODES = env.list("REDIS_CLUSTER_NODES", default="")
for _node in REDIS_CLUSTER_NODES:
    _host, _sep, _port = _node.rpartition(":")
    if not (_host and _sep and _port.isdigit()):
        raise ImproperlyConfigured(f"REDIS_CLUSTER_NODES: {_node!r} is not host:port")
if LB_REDIS_MODE == "cluster" and not REDIS_CLUSTER_NODES:
    raise ImproperlyConfigured("LB_REDIS_MODE=cluster needs REDIS_CLUSTER_NODES (host:port,...)")
# Board reads (the read selectors: pages, a player's standing, friends, sizes, snapshots) go to
# each slot's replica instead of its master, to take read load off the masters. A replica lags
# its master by the replication link (docs/operations.md "Reads from replicas" says how far);
# writes, ingestion and rebuilds always go to the masters. Cluster mode only.
REDIS_READ_FROM_REPLICAS = env.bool("REDIS_READ_FROM_REPLICAS", default=False)
if REDIS_READ_FROM_REPLICAS and LB_REDIS_MODE != "cluster":
    raise ImproperlyConfigured("REDIS_READ_FROM_REPLICAS=true needs LB_REDIS_MODE=cluster")

# Replicas of every topic the project creates, and how many must have a write before an
# acks=all producer gets its acknowledgement: with 3 and 2, one broker may die with nothing lost.
KAFKA_TOPIC_REPLICATION_FACTOR = env.int("KAFKA_TOPIC_REPLICATION_FACTOR", default=1)
KAFKA_TOPIC_MIN_INSYNC_REPLICAS = env.int("KAFKA_TOPIC_MIN_INSYNC_REPLICAS", default=1)
if not 1 <= KAFKA_TOPIC_MIN_INSYNC_REPLICAS <= KAFKA_TOPIC_REPLICATION_FACTOR:
    raise ImproperlyConfigured(
        f"KAFKA_TOPIC_MIN_INSYNC_REPLICAS={KAFKA_TOPIC_MIN_INSYNC_REPLICAS} must be between 1 "
        f"and KAFKA_TOPIC_REPLICATION_FACTOR={KAFKA_TOPIC_REPLICATION_FACTOR}"
    )

# --- Ingestion consumer (ingestion/consumer.py, docs/ingestion.md) ------------------------------

# Records per poll: one PostgreSQL statement and one Redis round trip per batch, so bigger
# batches amortise both; the batch is also what a crash replays.
INGEST_MAX_POLL_RECORDS = env.int("INGEST_MAX_POLL_RECORDS", default=5000)
INGEST_POLL_TIMEOUT_MS = env.int("INGEST_POLL_TIMEOUT_MS", default=200)
# A log line and a stats write every this many seconds.
INGEST_STATS_INTERVAL_SECONDS = env.int("INGEST_STATS_INTERVAL_SECONDS", default=10)
# Retry delay cap while PostgreSQL, Redis or Kafka is unreachable (doubling from 0.1 s). It is
# also how long a consumer may go on waiting once the dependency is back: a long outage is
# followed by this many seconds of nothing at worst (10 s was most of the time to resume).
INGEST_BACKOFF_MAX_SECONDS = env.int("INGEST_BACKOFF_MAX_SECONDS", default=2)
# kafka-python's cap on its own reconnect backoff to a broker (it doubles from 50 ms per failed
# attempt; its default cap of 30 s left consumers idle for up to half a minute after a broker
# restart). The consumer and its dead-letter producer try a lost broker this often at least.
INGEST_KAFKA_RECONNECT_BACKOFF_MAX_MS = env.int(
    "INGEST_KAFKA_RECONNECT_BACKOFF_MAX_MS", default=1000
)
# How often each consumer asks the boards' Redis who its masters are: a change (a replica
# promoted, a restart) makes it look for writes the old master lost and rebuild those boards.
INGEST_FAILOVER_CHECK_SECONDS = env.float("INGEST_FAILOVER_CHECK_SECONDS", default=1.0)
# A Kafka poll() that has not returned after this long ends the consumer process, for its
# supervisor to restart (ingestion/poll_watchdog.py: a stuck client); above the longest poll a
# group rebalance can make (max.poll.interval.ms, 300 s). 0 turns the watchdog off.
INGEST_POLL_STALL_SECONDS = env.float("INGEST_POLL_STALL_SECONDS", default=360.0)
# Kafka static membership id of this consumer process (e.g. the pod name); empty = dynamic.
INGEST_GROUP_INSTANCE_ID = env.str("INGEST_GROUP_INSTANCE_ID", default="")

# --- Rank events and webhooks (webhooks/, docs/webhooks.md) -----------------------------------

# The deliverer (manage.py deliver_webhooks) reads KAFKA_RANK_EVENTS_TOPIC (above) as a
# consumer group of its own.
# Where the deliverer puts a rank event it cannot read (not JSON, no eventId...), with the reason.
WEBHOOK_DEAD_LETTER_TOPIC = env.str(
    "WEBHOOK_DEAD_LETTER_TOPIC", default=f"{KAFKA_RANK_EVENTS_TOPIC}.webhooks.dlq"
)
WEBHOOK_CONSUMER_GROUP = env.str("WEBHOOK_CONSUMER_GROUP", default="leaderboard-webhooks")
# Kafka static membership id of this deliverer process (e.g. the pod name): a restart takes its
# partitions back at once instead of after the dead member's session timeout; empty = dynamic.
WEBHOOK_GROUP_INSTANCE_ID = env.str("WEBHOOK_GROUP_INSTANCE_ID", default="")
# Off: a webhook may only reach public addresses (checked after DNS resolution, and the
# connection goes to the address checked). On: loopback and private networks too; the local
# demo (make run) and the test suite turn it on, production should not.
WEBHOOK_ALLOW_PRIVATE = env.bool("WEBHOOK_ALLOW_PRIVATE", default=False)
# Fernet keys (comma-separated; the first encrypts, every one decrypts: rotation) that encrypt
# the endpoints' signing secrets at rest. Empty: one key derived from DJANGO_SECRET_KEY.
WEBHOOK_SECRET_KEYS = env.list("WEBHOOK_SECRET_KEYS", default="")
# Events per POST (the contract's most is 100).
WEBHOOK_BATCH_SIZE = env.int("WEBHOOK_BATCH_SIZE", default=100)
if not 1 <= WEBHOOK_BATCH_SIZE <= 100:
    raise ImproperlyConfigured(f"WEBHOOK_BATCH_SIZE={WEBHOOK_BATCH_SIZE}: use 1 to 100")
# Events each endpoint may have waiting in the deliverer's memory; past it they are kept in
# PostgreSQL at once, so a slow endpoint neither grows the process nor holds up the others.
WEBHOOK_QUEUE_SIZE = env.int("WEBHOOK_QUEUE_SIZE", default=1000)
# Seconds to connect to an endpoint, and to wait for each read of its answer.
WEBHOOK_CONNECT_TIMEOUT_SECONDS = env.float("WEBHOOK_CONNECT_TIMEOUT_SECONDS", default=3.0)
WEBHOOK_TIMEOUT_SECONDS = env.float("WEBHOOK_TIMEOUT_SECONDS", default=10.0)
# Retries of an endpoint that failed: the delay doubles from the first to the cap, each drawn
# between half and all of it (jitter), until this many hours after the batch was kept; then the
# batch is kept as failed for staff to resend or purge.
WEBHOOK_RETRY_FIRST_SECONDS = env.float("WEBHOOK_RETRY_FIRST_SECONDS", default=5.0)
WEBHOOK_RETRY_MAX_SECONDS = env.float("WEBHOOK_RETRY_MAX_SECONDS", default=3600.0)
WEBHOOK_RETRY_HOURS = env.float("WEBHOOK_RETRY_HOURS", default=24.0)
# Records per poll of the rank-events topic.
WEBHOOK_MAX_POLL_RECORDS = env.int("WEBHOOK_MAX_POLL_RECORDS", default=1000)
# How often the deliverer reloads the endpoints (a new, changed or deactivated one takes
# effect within this many seconds) and looks for kept batches resent from the admin.
WEBHOOK_REFRESH_SECONDS = env.float("WEBHOOK_REFRESH_SECONDS", default=5.0)
# Seconds of refused offset commits (a member kept out of its group) after which the deliverer
# exits with status 70 for its supervisor to restart it.
WEBHOOK_REBALANCE_STALL_SECONDS = env.float("WEBHOOK_REBALANCE_STALL_SECONDS", default=120.0)
# Seconds between the deliverer's stats in Redis (what /metrics and the dashboard show).
WEBHOOK_STATS_INTERVAL_SECONDS = env.float("WEBHOOK_STATS_INTERVAL_SECONDS", default=5.0)
# The demo receiver (POST /webhooks/demo-receiver/<endpoint>, shown at /admin/webhooks/receiver):
# on with DEBUG (make run), off otherwise.
WEBHOOK_DEMO_RECEIVER = env.bool("WEBHOOK_DEMO_RECEIVER", default=DEBUG)

# --- Celery --------------------------------------------------------------------------------------

CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="redis://127.0.0.1:6379/2")
CELERY_RESULT_BACKEND = env.str("CELERY_RESULT_BACKEND", default="") or None
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = "UTC"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# The queue tasks go to and workers read by default.
CELERY_TASK_DEFAULT_QUEUE = env.str("CELERY_TASK_DEFAULT_QUEUE", default="celery")

# --- Celery: surviving a broker restart -----------------------------------------------------------
# The two kombu crashes on a lost connection are handled in celery.py (the consumer and the
# request classes); these keep the worker and beat reconnecting on their own.
# None = retry the broker forever: the default (100 attempts, 2 s more each, capped at 30 s)
# ends the worker for good after about 45 minutes of broker outage.
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# A connection the broker or the network dropped without a reset (a failover, an idle
# timeout) is found within seconds instead of hanging a worker on a dead read forever:
# kombu's redis transport passes these to redis-py (the workaround in celery/celery#10205).
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "socket_connect_timeout": 5,
    "socket_timeout": 30,  # kombu's BRPOP blocks 1 s; 30 s never cuts a live reply short
    "socket_keepalive": True,
    "health_check_interval": 10,
    # Every task acks late: the broker hands a message to another worker when it is not acked
    # within this many seconds of its delivery, running or not (kombu's default is an hour).
    # A long task (a reconcile: 3,300 s) can wait its turn behind another in a worker's
    # prefetch, or a retry's countdown (up to 600 s) before it runs: well past an hour. The cost:
    # a message a killed worker held is delivered again after this long (periodic work runs
    # again sooner by its schedule).
    "visibility_timeout": 4 * 3600,
}
# The worker's consumer that reconnects even when kombu fails to close the lost connection.
CELERY_WORKER_CONSUMER = "leaderboard_project.celery:BrokerLossTolerantConsumer"

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
    # The release of the contracts it serves (README, "Contracts and versions"): one number,
    # pyproject.toml's.
    "VERSION": importlib.metadata.version("leaderboard"),
    "SERVE_INCLUDE_SCHEMA": False,
    # /api/docs and /api/redoc load their JS/CSS from our own static files (drf-spectacular-
    # sidecar), never from a CDN: they work offline and nothing unpinned runs in staff browsers.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# --- Read API ----------------------------------------------------------------------------------


# Anonymous clients' request rate per IP ("6000/min"; "off" disables the throttle).
API_ANON_THROTTLE_RATE = env.str("API_ANON_THROTTLE_RATE", default="6000/min")

# Trusted client address, request body cap, results from the future:
# Proxies in front of the web processes that each append the address they saw to
# X-Forwarded-For. 0: the header is ignored and the throttle keys on REMOTE_ADDR; N: on the N-th
# entry from the right. Never more than the proxies really there, or clients pick their key.
API_TRUSTED_PROXY_COUNT = env.int("API_TRUSTED_PROXY_COUNT", default=0)
# Largest request body the HTTP ingestion door reads (bytes); past it, 413 before parsing.
# 1,000 results (the per-request maximum) take about 150 KB; 1 MiB leaves room for formatting.
INGEST_HTTP_MAX_BODY_BYTES = env.int("INGEST_HTTP_MAX_BODY_BYTES", default=1024 * 1024)
# A result whose achievedAt is later than now plus this many seconds is rejected as
# achieved_in_future (dead-lettered by the consumer, a 400 item at the HTTP door): game
# servers' clocks drift a little, but a result from the future would win every tie.
INGEST_MAX_FUTURE_SKEW_SECONDS = env.int("INGEST_MAX_FUTURE_SKEW_SECONDS", default=300)
# How long each process trusts its memo of a season (the hot endpoints make no SQL query).
LEADERBOARD_SEASON_CACHE_SECONDS = env.float("LEADERBOARD_SEASON_CACHE_SECONDS", default=5.0)
# How long after its last successful load a memoized season or board is still served while
# PostgreSQL cannot be reached (seasons/memo.py): reads that need only Redis keep answering
# through an outage this long.
LEADERBOARD_SEASON_FALLBACK_SECONDS = env.float(
    "LEADERBOARD_SEASON_FALLBACK_SECONDS", default=3600.0
)
# How long each process trusts the seats taken it read for the boards list's "joined" on a
# tournament board (docs/tournaments.md); the join itself always decides from PostgreSQL.
LEADERBOARD_PARTICIPANTS_CACHE_SECONDS = env.float(
    "LEADERBOARD_PARTICIPANTS_CACHE_SECONDS", default=1.0
)
# How long each process trusts the metadata it looked up for an entry (board, player and exact
# score: a new value is a new lookup). Only a change that leaves the score as it was (a void of
# one of two equal results, a 0-point result in the same tick) waits this long to show.
LEADERBOARD_METADATA_CACHE_SECONDS = env.float("LEADERBOARD_METADATA_CACHE_SECONDS", default=10.0)
# Retry-After (seconds) of the 503 a request that needs PostgreSQL answers while it is down.
DATABASE_UNAVAILABLE_RETRY_AFTER_SECONDS = env.int(
    "DATABASE_UNAVAILABLE_RETRY_AFTER_SECONDS", default=5
)
# Each process checks the version of a board's top-list snapshot in Redis at most this often
# (sooner when a client has seen a newer one); the snapshot itself is read once per version.
LEADERBOARD_TOP_SNAPSHOT_READ_INTERVAL_SECONDS = env.float(
    "LEADERBOARD_TOP_SNAPSHOT_READ_INTERVAL_SECONDS", default=1.0
)
# A snapshot older than this is ignored and the top list is read from the live board.
LEADERBOARD_TOP_SNAPSHOT_MAX_AGE_SECONDS = env.float(
    "LEADERBOARD_TOP_SNAPSHOT_MAX_AGE_SECONDS", default=3.0
)
# Expiry of the stored snapshot: a season that stops being refreshed drops it.
LEADERBOARD_TOP_SNAPSHOT_TTL_SECONDS = env.int("LEADERBOARD_TOP_SNAPSHOT_TTL_SECONDS", default=60)
# Expiry of a weekly board built from the daily boards.
LEADERBOARD_WEEKLY_BOARD_TTL_SECONDS = env.int(
    "LEADERBOARD_WEEKLY_BOARD_TTL_SECONDS", default=14 * 24 * 3600
)

# --- i18n, static --------------------------------------------------------------------------------

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env.str("DJANGO_STATIC_ROOT", default=str(BASE_DIR / ".local" / "static")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# --- Prometheus metrics (leaderboard_project/metrics.py, docs/operations.md "Metrics") -----------

# prometheus_client reads this variable itself, when it is first imported: set, every metric of
# the process lives in a file there and /metrics (and the Celery worker's exporter) sums the files
# of all the processes that share it. Gunicorn with more than one worker and a prefork Celery
# worker need it (one folder per process group, emptied when the group starts); a consumer must not
# have it: it serves its own metrics (INGEST_METRICS_PORT). Read here so our code asks settings.
PROMETHEUS_MULTIPROC_DIR = env.str("PROMETHEUS_MULTIPROC_DIR", default="")
# Where a consumer and the Celery worker serve their metrics (GET /metrics on that port); 0: not
# served. Each consumer process needs a port of its own: Prometheus scrapes each one as a target,
# so a dead consumer shows as up == 0.
METRICS_LISTEN_ADDRESS = env.str("METRICS_LISTEN_ADDRESS", default="127.0.0.1")
INGEST_METRICS_PORT = env.int("INGEST_METRICS_PORT", default=0)
CELERY_METRICS_PORT = env.int("CELERY_METRICS_PORT", default=0)
# Who may read the web server's /metrics and /metrics.json and /healthz's details (each error's
# text): clients in these networks (comma-separated CIDRs or addresses), and logged-in staff.
# Everyone else gets a 403 and /healthz's short form. The client's address is the throttle's
# (REMOTE_ADDR, or behind API_TRUSTED_PROXY_COUNT proxies what the outermost one saw): behind a
# proxy with that count left at 0, every request seems to come from the proxy's address.
METRICS_ALLOWED_NETWORKS = env.list(
    "METRICS_ALLOWED_NETWORKS",
    default="127.0.0.0/8,::1/128,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fc00::/7",
)
for _network in METRICS_ALLOWED_NETWORKS:
    try:
        ipaddress.ip_network(_network)
    except ValueError as _exc:
        raise ImproperlyConfigured(f"METRICS_ALLOWED_NETWORKS: {_network!r}: {_exc}") from None

# How long the public's /healthz answers share one round of dependency checks, per process
# (seconds; 0: every request checks). Operators always get a fresh check.
HEALTHZ_PUBLIC_CACHE_SECONDS = env.float("HEALTHZ_PUBLIC_CACHE_SECONDS", default=1.0)

# --- Logging -------------------------------------------------------------------------------------

LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
# text: one human line per record; json: one JSON object per line for log shippers
# (timestamp, level, logger, message, exc_info when there is a traceback, and any extra fields).
LOG_FORMAT = env.str("LOG_FORMAT", default="text")
if LOG_FORMAT not in {"text", "json"}:
    raise ImproperlyConfigured(f"LOG_FORMAT={LOG_FORMAT!r} is not one of text, json")
# Tasks Celery logs nothing routine about (beat's "Sending due task", the worker's "received"
# and "succeeded"): by default every periodic task (schedules.py), which logs what it did itself.
# Their warnings and errors still show; "none" logs every task's lines.
_log_quiet_tasks = env.list("LOG_QUIET_TASKS", default=",".join(ROUTINE_TASKS))
LOG_QUIET_TASKS = [] if _log_quiet_tasks == ["none"] else _log_quiet_tasks
_console_handler = {
    "class": "logging.StreamHandler",
    "formatter": LOG_FORMAT,
    "filters": ["kafka_repeats", "quiet_tasks"],
}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "text": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        # python-json-logger: extra= fields and values json cannot encode (datetimes, UUIDs)
        # come out right without a formatter of our own to maintain.
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(levelname)s %(name)s %(message)s",
            "rename_fields": {"levelname": "level", "name": "logger"},
            # ISO 8601 in UTC with microseconds, from the record's creation time.
            "timestamp": True,
        },
    },
    "filters": {
        # kafka-python logs each failed reconnect (several a second while a broker is away):
        # one line per kind and interval is kept (leaderboard_project/logfilters.py).
        "kafka_repeats": {
            "()": "leaderboard_project.logfilters.RepeatedRecordsFilter",
            "loggers": ["kafka"],
            "interval_seconds": env.float("KAFKA_LOG_REPEAT_SECONDS", default=60.0),
        },
        "quiet_tasks": {
            "()": "leaderboard_project.logfilters.QuietTasksFilter",
            "tasks": LOG_QUIET_TASKS,
        },
    },
    "handlers": {"console": _console_handler},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "kafka": {"level": env.str("KAFKA_LOG_LEVEL", default="WARNING")},
        "django.db.backends": {"level": "INFO"},
        # gunicorn's workers load Django, which then routes gunicorn's own error and access
        # lines through the handler above (JSON too); the master process keeps gunicorn's
        # format for its few start-up lines.
        "gunicorn.error": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "gunicorn.access": {"handlers": ["console"], "level": "INFO", "propagate": False},
    },
}

# --- Seasons: close-out -------------------------------------------------------------------------

# How many final entries a close-out copies into PostgreSQL (and the standings API serves).
FINAL_STANDINGS_SIZE = env.int("FINAL_STANDINGS_SIZE", default=1000)
# How long every player's archived final entries (GET /api/players/{player}/history) are kept
# after their season ended; a periodic task prunes older ones.
HISTORY_RETENTION_DAYS = env.int("HISTORY_RETENTION_DAYS", default=400)
if HISTORY_RETENTION_DAYS < 1:
    # 0 would prune every ended season's history each hour (not "keep for good", as 0 means for
    # MATCH_RESULTS_RETENTION_DAYS): refused rather than guessed.
    raise ImproperlyConfigured(
        f"HISTORY_RETENTION_DAYS={HISTORY_RETENTION_DAYS}: use at least 1 (days kept after a "
        "season's end)"
    )
# How long a closed season's match results (and the results its tournament boards refused) are
# kept after its close-out: the window in which voids and bans can still re-rank its final
# standings. A periodic task deletes them past it; 0 keeps every result for good.
MATCH_RESULTS_RETENTION_DAYS = env.int("MATCH_RESULTS_RETENTION_DAYS", default=90)
if MATCH_RESULTS_RETENTION_DAYS < 0:
    raise ImproperlyConfigured(
        f"MATCH_RESULTS_RETENTION_DAYS={MATCH_RESULTS_RETENTION_DAYS}: use days (0: keep for good)"
    )
# Seconds between a season's switch to "closing" and the moment its close-out records the
# topic's end offsets to drain: results game servers publish just after the end still count.
SEASON_CLOSE_GRACE_SECONDS = env.int("SEASON_CLOSE_GRACE_SECONDS", default=30)
# How long one close-out run waits for the consumer group to commit up to the topic's end
# offsets recorded when the drain began; past it, it finalizes nothing and says what lags. Also
# close_season's default --timeout.
SEASON_CLOSE_DRAIN_TIMEOUT_SECONDS = env.float("SEASON_CLOSE_DRAIN_TIMEOUT_SECONDS", default=600.0)
