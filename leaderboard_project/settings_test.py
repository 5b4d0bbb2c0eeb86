"""Settings of the test suite (pyproject.toml: pytest-django's DJANGO_SETTINGS_MODULE).

The local services' settings (``local_clusters``: ``make test-cluster`` runs the suite on the
local clusters) plus what only the suite needs. pytest-django exports the module's name, so the
processes the tests start (manage.py commands, Celery, probes) load it too. The suite's
DJANGO_SECRET_KEY comes from pyproject.toml ([tool.pytest_env]): the production settings read
it before this module runs.
"""

from .env import StrictEnv
from .local_clusters import *  # noqa: F403
from .local_clusters import ALLOWED_HOSTS, CELERY_BROKER_URL, DATABASES

_env = StrictEnv()

# Lets several checkouts run their test suites against one server at once.
_test_db_name = _env.str("DJANGO_TEST_DATABASE_NAME", default="")
if _test_db_name:
    DATABASES["default"]["TEST"] = {"NAME": _test_db_name}

# Django's test client's host.
ALLOWED_HOSTS = [*ALLOWED_HOSTS, "testserver"]

# The Kafka outage tests: the broker's FAULTS listener (infra/kafka/server.properties.template)
# and the address it advertises, where the tests run a TCP proxy they can cut. By default the
# ports devservices gives that listener (LB_KAFKA_FAULTS_PORT and LB_KAFKA_FAULTS_PROXY_PORT,
# else the local broker's LB_KAFKA_PORT + 2 and + 3), so a suite run against services on other
# ports never binds the shared broker's proxy port.
_kafka_port = _env.int("LB_KAFKA_PORT", default=9092)
_faults_port = _env.int("LB_KAFKA_FAULTS_PORT", default=_kafka_port + 2)
_faults_proxy_port = _env.int("LB_KAFKA_FAULTS_PROXY_PORT", default=_kafka_port + 3)
KAFKA_FAULTS_LISTENER = _env.str("KAFKA_FAULTS_LISTENER", default=f"127.0.0.1:{_faults_port}")
KAFKA_FAULTS_PROXY = _env.str("KAFKA_FAULTS_PROXY", default=f"127.0.0.1:{_faults_proxy_port}")

# Every /healthz of the suite checks afresh: tests turn dependencies off and on between asks.
HEALTHZ_PUBLIC_CACHE_SECONDS = 0.0

# The suite's Celery broker: a database of its own. The tasks tests queue with no worker to run
# them (a sweep's close-outs, archives) stayed on the shared broker db 2, and the worker of the
# next `make run` ran them against seasons only the test database had.
_local_broker = f"redis://127.0.0.1:{_env.int('LB_REDIS_PORT', default=6379)}"
if CELERY_BROKER_URL == f"{_local_broker}/2":  # noqa: SIM300 (local_clusters' default)
    CELERY_BROKER_URL = f"{_local_broker}/3"

# The suite's own speed, never its subject. Its tests commit many small transactions, each
# waiting for its WAL flush; no test crashes PostgreSQL (its outages are proxy cuts), so an
# unflushed commit is never lost. Production and `make run` keep synchronous commits.
DATABASES["default"]["OPTIONS"]["options"] = " ".join(
    filter(None, [DATABASES["default"]["OPTIONS"].get("options"), "-c synchronous_commit=off"])
)
# Transactional tests empty the tables with DELETE, not TRUNCATE (suite_postgresql/base.py).
DATABASES["default"]["ENGINE"] = "leaderboard_project.suite_postgresql"
# Hashing a password at full strength takes a large part of a second; the suite's logins prove
# the admin's permissions, not the hasher.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
