# Two commands on a fresh machine: `make run` (the whole system) and `make test` (the suite).
# Both install what is missing and start the local services; both are safe to run twice.

SHELL := /bin/bash
PYTHON_BIN ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The local services' tool is standard library only: the system python3 runs it, venv or not.
SYSTEM_PYTHON ?= python3
SERVICES := $(SYSTEM_PYTHON) -m devservices

.DEFAULT_GOAL := help
.PHONY: help venv browser services services-stop services-status prometheus migrate lint test test-only test-cluster test-later run run-free bench clean

help:
	@echo "make run              install, start services, migrate, demo data, run every process"
	@echo "make test             install, start services, lint, run the whole test suite,"
	@echo "                      then the Redis/Kafka tests again on the local clusters"
	@echo "make services         start PostgreSQL, Redis and Kafka on loopback (.local/)"
	@echo "make services-stop    stop them"
	@echo "make services-status  tell whether they run"
	@echo "                      (LB_REDIS_MODE=cluster / LB_KAFKA_BROKERS=3: also the local clusters)"
	@echo "make lint             ruff + mypy + import contracts"
	@echo "make bench            how to run each benchmark (on demand, never in the suite)"

$(STAMP): pyproject.toml
	@command -v $(PYTHON_BIN) >/dev/null || { echo "$(PYTHON_BIN) is required"; exit 1; }
	@# Debian's python3 has no ensurepip without python3-venv, and a venv made half-way (a python,
	@# no pip) would pass for a made one at the next run.
	@$(PYTHON_BIN) -c 'import ensurepip' 2>/dev/null || { echo "installing python3-venv (apt)"; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv; }
	@test -x $(VENV)/bin/pip || { rm -rf $(VENV); $(PYTHON_BIN) -m venv $(VENV); }
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

services: $(STAMP)
	$(SERVICES) start

# Debian's prometheus + promtool: the suite runs a real Prometheus and checks the alert rules.
prometheus:
	$(SERVICES) install-prometheus

services-stop:
	$(SERVICES) stop

services-status:
	$(SERVICES) status

# The local processes run on the local services, clusters included when LB_REDIS_MODE=cluster /
# LB_KAFKA_BROKERS=3 say so (leaderboard_project/local_clusters.py); manage.py, gunicorn and
# Celery default to the production settings.
LOCAL_SETTINGS := leaderboard_project.local_clusters

migrate: export DJANGO_SETTINGS_MODULE ?= $(LOCAL_SETTINGS)
migrate: services
	$(PY) manage.py migrate --noinput

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	@# django-stubs imports the settings, which refuse the development secret with DEBUG off.
	DJANGO_DEBUG=true $(VENV)/bin/mypy .
	$(VENV)/bin/lint-imports

# The browser tests drive Debian's chromium (never a browser downloaded by Playwright).
browser:
	$(SERVICES) install-browser

# The slowest tests of each pass are listed at its end (where a run's time goes).
PYTEST_ARGS ?= --durations=15

# The two passes run side by side, each line of output marked with its pass: their tests wait on
# Kafka, Redis and processes far more than they compute, and they share only PostgreSQL (each
# with its own test database) and the cache Redis (under each test's own key prefix). The
# single pass is the longer: its process-kill fault cases (LATER_TESTS) run after the cluster
# pass instead, on the single-node services beside the rest of the single pass (each case
# kills only the processes it started, on its own topics and keys), in a database of their own.
# Each pass's own output is kept in .local/test-logs/, and the tests that failed are repeated
# last: interleaved passes bury pytest's summary, and CI often shows only a run's last lines.
TEST_LOGS := .local/test-logs
LATER_TESTS ?= tests/faults/test_consumer_kills.py tests/faults/test_rank_events_kills.py \
	tests/faults/test_reconcile_race.py
test: services browser prometheus lint $(STAMP)
	@set -o pipefail; mkdir -p $(TEST_LOGS); rm -f $(TEST_LOGS)/later.status; \
	( $(MAKE) --no-print-directory test-cluster 2>&1 | tee $(TEST_LOGS)/cluster.log \
		| sed -u 's/^/[cluster] /'; cluster=$$?; \
	  $(MAKE) --no-print-directory test-later 2>&1 | tee $(TEST_LOGS)/later.log \
		| sed -u 's/^/[later]   /'; later=$$?; \
	  echo "$$later" > $(TEST_LOGS)/later.status; exit $$cluster ) & cluster=$$!; \
	$(MAKE) --no-print-directory test-only PYTEST_IGNORE="$(addprefix --ignore=,$(LATER_TESTS))" \
		2>&1 | tee $(TEST_LOGS)/single.log | sed -u 's/^/[single]  /'; single=$$?; \
	wait $$cluster; cluster=$$?; later=$$(cat $(TEST_LOGS)/later.status 2>/dev/null || echo 1); \
	for pass in single cluster later; do \
		grep -E '^(FAILED|ERROR) tests/' $(TEST_LOGS)/$$pass.log | cut -c1-400 \
			| sed "s/^/make test: $$pass pass: /"; \
	done; \
	echo "make test: single-node pass exit $$single, cluster pass exit $$cluster, later pass exit $$later"; \
	test $$single -eq 0 && test $$cluster -eq 0 && test $$later -eq 0

# The single-node suite; `make test` runs LATER_TESTS apart (PYTEST_IGNORE), here they run too.
PYTEST_IGNORE ?=
test-only: $(STAMP)
	$(VENV)/bin/pytest $(PYTEST_IGNORE) $(PYTEST_ARGS)

# make test's third pass: LATER_TESTS on the single-node services, after the cluster pass.
test-later: $(STAMP)
	DJANGO_TEST_DATABASE_NAME=$${DJANGO_TEST_DATABASE_NAME:-test_leaderboard}_later \
		$(VENV)/bin/pytest -p no:cacheprovider $(LATER_TESTS) $(PYTEST_ARGS)

# The second pass: every test that touches the boards' Redis or Kafka, again on the
# local Redis Cluster (3 masters + 3 replicas) and three-broker Kafka, plus their failover tests.
# The clusters stay up afterwards for the next run (`python3 -m devservices stop-clusters`).
CLUSTER_TESTS ?= tests/leaderboard tests/ingestion tests/closeout tests/infra tests/webhooks
# Pure units are left out of it (they meet neither Redis nor Kafka), and the random interleavings
# of the exactly-once model run one seed of 500 steps (the first pass runs every seed in full).
# Its own test database lets it run beside the first pass; pytest's cache stays the first pass's.
CLUSTER_IGNORE ?= --ignore=tests/ingestion/test_schema.py --ignore=tests/ingestion/test_dead_letter_reason.py --ignore=tests/ingestion/test_retrying.py --ignore=tests/ingestion/test_offsets.py \
	--ignore=tests/ingestion/test_poll_watchdog.py --ignore=tests/leaderboard/test_forms.py \
	--ignore=tests/leaderboard/test_serializers.py --ignore=tests/leaderboard/test_board_stream_units.py --ignore=tests/webhooks/test_units.py \
	--ignore=tests/webhooks/test_signing.py --ignore=tests/webhooks/test_targets.py
test-cluster: $(STAMP)
	LB_REDIS_MODE=cluster LB_KAFKA_BROKERS=3 $(SERVICES) start
	LB_REDIS_MODE=cluster LB_KAFKA_BROKERS=3 LB_MODEL_SEEDS=$${LB_MODEL_SEEDS:-1} \
		LB_MODEL_STEPS=$${LB_MODEL_STEPS:-500} \
		DJANGO_TEST_DATABASE_NAME=$${DJANGO_TEST_DATABASE_NAME:-test_leaderboard}_cluster \
		$(VENV)/bin/pytest -p no:cacheprovider $(CLUSTER_TESTS) $(CLUSTER_IGNORE) $(PYTEST_ARGS)

# The local demo runs with DEBUG on (DJANGO_DEBUG=false make run to try production behaviour,
# with a DJANGO_SECRET_KEY); DEBUG is off by default everywhere else.
run: export DJANGO_DEBUG ?= true
run: export DJANGO_SETTINGS_MODULE ?= $(LOCAL_SETTINGS)
# The board pages open the board stream (the Procfile's "stream", on STREAM_PORT) from the browser.
run: export BOARD_STREAM_URL ?= http://127.0.0.1:$(or $(STREAM_PORT),8001)
# The demo webhook posts to the web process's own receiver on loopback (docs/webhooks.md, "SSRF").
run: export WEBHOOK_ALLOW_PRIVATE ?= true
run: run-free migrate
	$(PY) manage.py collectstatic --noinput -v 0
	$(PY) manage.py bootstrap_demo --web-port $${PORT:-8000}
	$(PY) manage.py setup_periodic_tasks
	@echo "Starting every process (Ctrl-C stops them all); web on http://127.0.0.1:$${PORT:-8000}/, board stream on $${BOARD_STREAM_URL}"
	@# -e /dev/null: honcho would lay a .env (a copy of .env.example, DJANGO_DEBUG=false and no
	@# secret) over what this target exports, and every process would refuse to start. The lock:
	@# a second make run would start every process twice (two beats send every task twice).
	@mkdir -p .local
	@PORT=$${PORT:-8000} flock -n -E 75 .local/run.lock $(VENV)/bin/honcho start -f Procfile \
		-e /dev/null || { rc=$$?; if [ $$rc -eq 75 ]; then \
		echo "make run: another make run of this checkout is running (.local/run.lock)" >&2; fi; \
		exit $$rc; }

# A second make run of this checkout is refused before it changes anything (its demo set-up would
# point the running demo's webhook at its own port): a look at the lock that honcho holds above.
run-free:
	@mkdir -p .local
	@flock -n -E 75 .local/run.lock true || { \
		echo "make run: another make run of this checkout is running (.local/run.lock)" >&2; exit 75; }

# Benchmarks take minutes and load the whole machine: this only says how to run each one.
bench:
	@echo "Benchmarks (each documents its options in --help; results go to docs/benchmarks.md):"
	@echo "  bench/ingest                  ingestion throughput and produce-to-visible latency"
	@echo "      full scale: bench/ingest --consumers 2 --backlog 1000000 --burst-seconds 60"
	@echo "      cohorts: bench/ingest --cohort-size 50 --cohort-rounds 2 (with and without cohorts;"
	@echo "      --cohort-players 20000: most results a returning player's)"
	@echo "      tournaments: bench/ingest --tournament --tournament-rounds 2 (a tournament board against a plain one)"
	@echo "      rank events: bench/ingest --events (a fresh board: the worst case); --events-rounds 2"
	@echo "      (warmed boards with and without events: a season's steady state; --events-players 20000)"
	@echo "  $(PY) bench/read/run.py --players 1000000   read path: Redis vs raw vs PostgreSQL"
	@echo "      cohorts: add --cohort-size 50 (a league board's cohort read against the player entry)"
	@echo "  $(PY) bench/store.py          PostgreSQL CPU per stored result, with/without a per-row FK"
	@echo "  $(PY) bench/wide_layout.py    Redis's time per change: a tie-break board's layouts against a plain board"
	@echo "  bench/closeout                close-out with and without every player's history archive"
	@echo "      full scale: bench/closeout --players 10000000"
	@echo "      leagues: add --league (a league board's movements and grants at the close-out)"
	@echo "  bench/rebuild                 rebuild from PostgreSQL while ingestion keeps running"
	@echo "      full scale: bench/rebuild --players 10000000 --results 20000000 [--reuse]"
	@echo "  bench/webhooks                webhook deliverer: events/s to a local receiver"
	@echo "  bench/ingest and bench/read/run.py take --cluster: the local Redis Cluster and 3 Kafka"
	@echo "      brokers (as LB_REDIS_MODE=cluster LB_KAFKA_BROKERS=3; docs/benchmarks.md)"
	@echo "They need the local services (make services) and the venv (make venv)."

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
