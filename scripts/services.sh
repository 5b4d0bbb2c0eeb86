#!/usr/bin/env bash
# Project-local PostgreSQL, Redis and Apache Kafka (KRaft) on loopback.
#
#   scripts/services.sh start    install what is missing, start, wait until each answers
#   scripts/services.sh stop     stop what this LOCAL_DIR started
#   scripts/services.sh status   one line per service; exit 0 if all answer, 3 otherwise
#
# Clusters (README, "Running on clusters"), on top of the single-node services above:
#   LB_REDIS_MODE=cluster  `start` also starts a Redis Cluster of 3 masters + 3 replicas
#   LB_KAFKA_BROKERS=3     `start` also starts a 3-node KRaft Kafka cluster
#   `status` reports the clusters when their variable is set or one of their nodes runs;
#   `stop` stops every cluster node this LOCAL_DIR started (pid files), whatever the
#   variables say, along with the single-node services.
#   scripts/services.sh stop-clusters          stop the cluster nodes only
#   scripts/services.sh redis-cluster-kill P   SIGKILL the Redis cluster node on port P
#   scripts/services.sh redis-cluster-start P  restart it; waits until it rejoined
#   scripts/services.sh kafka-broker-kill N    SIGKILL Kafka cluster node N (1..3)
#   scripts/services.sh kafka-broker-start N   restart it; waits until 3 brokers are registered
#
# Everything (data, logs, pid files, Kafka jars) lives under
#   LOCAL_DIR="${LB_LOCAL_DIR:-<repo root>/.local}"
# with one exception: when the `postgres` OS user cannot reach LOCAL_DIR (the
# checkout sits under a root-only 0700 directory such as /root), the cluster
# lives in ~postgres/lb-<hash of LOCAL_DIR> (i.e. /var/lib/postgresql/lb-...;
# /var/tmp if that is unusable) and $LOCAL_DIR/postgres is a symlink to it.
#
# Environment:
#   LB_LOCAL_DIR              state folder (default <repo>/.local)
#   LB_PG_PORT                PostgreSQL port         (default 5432)
#   LB_REDIS_PORT             Redis port              (default 6379)
#   LB_KAFKA_PORT             Kafka client port       (default 9092)
#   LB_KAFKA_CONTROLLER_PORT  Kafka controller port   (default 9093)
#   LB_KAFKA_FAULTS_PORT      Kafka listener the test suite reaches through a proxy
#                             (default: client port + 2)
#   LB_KAFKA_FAULTS_PROXY_PORT  the port that listener advertises (default: client port + 3)
#   LB_START_TIMEOUT          seconds to wait for each service (default 120)
#   LB_REDIS_MODE             single (default) | cluster
#   LB_REDIS_CLUSTER_PORT     first Redis cluster port; nodes use it .. +5 (default 7000)
#   LB_KAFKA_BROKERS          1 (default) | 3
#   LB_KAFKA_CLUSTER_PORT     client port of Kafka cluster node 1; nodes 2, 3: +1, +2 (default 19092)
#   LB_KAFKA_CLUSTER_CONTROLLER_PORT  controller port of node 1; +1, +2 (default 19192)
#
# Several checkouts / git worktrees may share one set of services: when a port
# already answers as the expected service, `start` reuses it instead of failing.
set -Eeuo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
LOCAL_DIR="${LB_LOCAL_DIR:-$ROOT/.local}"
PG_PORT="${LB_PG_PORT:-5432}"
REDIS_PORT="${LB_REDIS_PORT:-6379}"
KAFKA_PORT="${LB_KAFKA_PORT:-9092}"
KAFKA_CONTROLLER_PORT="${LB_KAFKA_CONTROLLER_PORT:-9093}"
KAFKA_FAULTS_PORT="${LB_KAFKA_FAULTS_PORT:-$((KAFKA_PORT + 2))}"
KAFKA_FAULTS_PROXY_PORT="${LB_KAFKA_FAULTS_PROXY_PORT:-$((KAFKA_PORT + 3))}"
START_TIMEOUT="${LB_START_TIMEOUT:-120}"
REDIS_MODE="${LB_REDIS_MODE:-single}"
REDIS_CLUSTER_PORT="${LB_REDIS_CLUSTER_PORT:-7000}"
KAFKA_BROKERS="${LB_KAFKA_BROKERS:-1}"
KAFKA_CLUSTER_PORT="${LB_KAFKA_CLUSTER_PORT:-19092}"
KAFKA_CLUSTER_CONTROLLER_PORT="${LB_KAFKA_CLUSTER_CONTROLLER_PORT:-19192}"

HOST=127.0.0.1
REUSED=()
DB_NAME=leaderboard
DB_USER=leaderboard
DB_PASSWORD=leaderboard

KAFKA_POM="$ROOT/infra/kafka/pom.xml"
KAFKA_LOG4J="$ROOT/infra/kafka/log4j2.yaml"
KAFKA_TEMPLATE="$ROOT/infra/kafka/server.properties.template"

# ----------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------
log()  { printf '[services] %s\n' "$*" >&2; }
die()  { printf '[services] ERROR: %s\n' "$*" >&2; exit 1; }

# Make LOCAL_DIR absolute (the path ends up in configs and pid files).
case "$LOCAL_DIR" in /*) ;; *) LOCAL_DIR="$PWD/$LOCAL_DIR" ;; esac

PG_LINK="$LOCAL_DIR/postgres"          # real dir, or symlink to ~postgres/lb-<hash>
REDIS_DIR="$LOCAL_DIR/redis"
REDIS_CONF="$REDIS_DIR/redis.conf"
REDIS_PID="$REDIS_DIR/redis.pid"
REDIS_LOG="$REDIS_DIR/redis.log"
KAFKA_DIR="$LOCAL_DIR/kafka"
KAFKA_LIBS="$KAFKA_DIR/libs"
KAFKA_DATA="$KAFKA_DIR/data"
KAFKA_LOGS="$KAFKA_DIR/logs"
KAFKA_PROPS="$KAFKA_DIR/server.properties"
KAFKA_PID="$KAFKA_DIR/kafka.pid"
KAFKA_OUT="$KAFKA_LOGS/kafka.out"
REDIS_CLUSTER_DIR="$LOCAL_DIR/redis-cluster"
KAFKA_CLUSTER_DIR="$LOCAL_DIR/kafka-cluster"

case "$REDIS_MODE" in single|cluster) ;; *) die "LB_REDIS_MODE=$REDIS_MODE: use single or cluster" ;; esac
case "$KAFKA_BROKERS" in 1|3) ;; *) die "LB_KAFKA_BROKERS=$KAFKA_BROKERS: use 1 or 3" ;; esac
for _v in REDIS_CLUSTER_PORT KAFKA_CLUSTER_PORT KAFKA_CLUSTER_CONTROLLER_PORT; do
    [[ "${!_v}" =~ ^[0-9]+$ ]] || die "LB_$_v=${!_v} is not a port number"
done

IS_ROOT=0; [ "$(id -u)" -eq 0 ] && IS_ROOT=1
PG_OS_USER=postgres; [ "$IS_ROOT" -eq 1 ] || PG_OS_USER="$(id -un)"

# Run a command as the PostgreSQL OS user (postgres refuses to run as root). From /, because
# the caller's directory may be one the postgres user cannot enter (a 0700 clone under /tmp);
# every path handed over is absolute.
as_pg() {
    if [ "$IS_ROOT" -eq 1 ]; then
        if command -v runuser >/dev/null 2>&1; then
            (cd / && runuser -u "$PG_OS_USER" -- "$@")
        else
            (cd / && su -s /bin/sh "$PG_OS_USER" -c "$(printf '%q ' "$@")")
        fi
    else
        "$@"
    fi
}

# True when something accepts TCP connections on 127.0.0.1:$1.
port_open() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

# Describe who listens on a port (best effort, for error messages).
port_owner() {
    if command -v ss >/dev/null 2>&1; then
        ss -Hltnp "sport = :$1" 2>/dev/null | sed -n 's/.*users:((\(.*\)))/\1/p' | head -n1
    fi
}

# An executable on PATH (bash's `command -v` also reports non-executable files).
have() { local p; p="$(command -v "$1" 2>/dev/null)" && [ -x "$p" ]; }

pid_alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

# pid from a pid file if the process is alive and its command line matches $2.
live_pid() {
    local file="$1" pattern="$2" pid
    [ -f "$file" ] || return 1
    pid="$(head -n1 "$file" 2>/dev/null | tr -dc '0-9')"
    pid_alive "$pid" || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$pattern" || return 1
    printf '%s\n' "$pid"
}

# Poll "$@" until it succeeds or $timeout seconds pass.
wait_until() {
    local timeout="$1"; shift
    local deadline=$((SECONDS + timeout))
    while :; do
        if "$@" >/dev/null 2>&1; then return 0; fi
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 0.5
    done
}

show_log_tail() {
    local f="$1"
    [ -f "$f" ] || return 0
    printf '[services] ---- last lines of %s ----\n' "$f" >&2
    tail -n 25 "$f" >&2 || true
    printf '[services] ----\n' >&2
}

hash_of() { printf '%s' "$1" | sha256sum | cut -c1-12; }

# ----------------------------------------------------------------------------
# installation (only what is missing)
# ----------------------------------------------------------------------------
pg_bin_dir() {
    if [ -n "${LB_PG_BIN:-}" ]; then printf '%s\n' "$LB_PG_BIN"; return 0; fi
    local d
    d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)"
    if [ -n "$d" ] && [ -x "$d/initdb" ]; then printf '%s\n' "$d"; fi
    return 0
}

ensure_installed() {
    local pkgs=()
    { [ -n "$(pg_bin_dir)" ] && [ -x "$(pg_bin_dir)/psql" ]; } || pkgs+=(postgresql)
    { have redis-server && have redis-cli; } || pkgs+=(redis-server)
    have java || pkgs+=(openjdk-17-jre-headless)
    have mvn || pkgs+=(maven)
    [ "${#pkgs[@]}" -eq 0 ] && return 0

    [ "$IS_ROOT" -eq 1 ] || die "missing packages: ${pkgs[*]} (run as root or: sudo apt-get install -y ${pkgs[*]})"
    command -v apt-get >/dev/null 2>&1 || die "missing packages: ${pkgs[*]} and apt-get is not available"

    log "installing ${pkgs[*]} via apt-get (system services are NOT started)..."
    # Forbid maintainer scripts from starting the system postgres/redis services
    # (invoke-rc.d and deb-systemd-invoke honour policy-rc.d exit code 101).
    local policy=/usr/sbin/policy-rc.d created_policy=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod 755 "$policy"; created_policy=1
    fi
    local rc=0 aptlog="/tmp/lb-services-apt.$$.log"
    {
        DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "${pkgs[@]}"
    } >"$aptlog" 2>&1 || rc=$?
    [ "$created_policy" -eq 1 ] && rm -f "$policy"
    if [ "$rc" -ne 0 ]; then
        show_log_tail "$aptlog"; die "apt-get install ${pkgs[*]} failed (full log: $aptlog)"
    fi
    rm -f "$aptlog"

    # Belt and braces: if the packages' system services run anyway, stop them
    # and keep them from coming back at boot (they would collide on our ports).
    local c
    if [[ " ${pkgs[*]} " == *" postgresql "* ]] && command -v pg_lsclusters >/dev/null 2>&1; then
        while read -r ver name _port status _; do
            [ -n "$name" ] || continue
            [ -f "/etc/postgresql/$ver/$name/start.conf" ] && echo manual >"/etc/postgresql/$ver/$name/start.conf"
            if [ "$status" = online ]; then
                log "stopping Debian's system cluster $ver/$name started by the package install"
                pg_ctlcluster "$ver" "$name" stop || true
            fi
        done < <(pg_lsclusters -h 2>/dev/null)
    fi
    if [[ " ${pkgs[*]} " == *" redis-server "* ]]; then
        # Debian's /etc/redis/redis.conf uses this pidfile; ours live in LOCAL_DIR.
        c="$(cat /run/redis/redis-server.pid 2>/dev/null || true)"
        if pid_alive "$c"; then
            log "stopping Debian's system redis-server started by the package install"
            service redis-server stop >/dev/null 2>&1 || true
        fi
        command -v systemctl >/dev/null 2>&1 && systemctl disable redis-server >/dev/null 2>&1 || true
    fi
    have java || die "java still missing after install"
    have mvn || die "mvn still missing after install"
    [ -n "$(pg_bin_dir)" ] || die "PostgreSQL binaries still missing after install"
    have redis-server || die "redis-server still missing after install"
}

# ----------------------------------------------------------------------------
# PostgreSQL
# ----------------------------------------------------------------------------
PG_HOME=""      # resolved (real) cluster folder: data/, run/ (socket), postgres.log
PG_DATA=""
PG_SOCK=""
PG_LOG=""

pg_resolve_paths() {
    if [ -L "$PG_LINK" ]; then
        PG_HOME="$(readlink -m "$PG_LINK")"
    else
        PG_HOME="$PG_LINK"
    fi
    PG_DATA="$PG_HOME/data"
    PG_SOCK="$PG_HOME/run"
    PG_LOG="$PG_HOME/postgres.log"
}

# Decide where the cluster lives (first start only) and make it usable by the
# postgres OS user.
pg_prepare_home() {
    mkdir -p "$LOCAL_DIR"
    if [ -L "$PG_LINK" ]; then
        mkdir -p "$(readlink "$PG_LINK")"
    elif [ ! -e "$PG_LINK" ]; then
        mkdir -p "$PG_LINK"
        if [ "$IS_ROOT" -eq 1 ]; then
            chown "$PG_OS_USER": "$PG_LINK"; chmod 700 "$PG_LINK"
            if ! as_pg test -w "$PG_LINK" -a -x "$PG_LINK"; then
                # e.g. checkout under /root (0700): postgres cannot traverse to
                # it. Keep the cluster in the postgres user's home (not /var/tmp,
                # which systemd-tmpfiles ages out after 30 days).
                local base alt
                base="$(getent passwd "$PG_OS_USER" | cut -d: -f6)"
                if [ -z "$base" ] || ! as_pg test -d "$base" -a -w "$base" -a -x "$base"; then
                    base=/var/tmp
                fi
                alt="$base/lb-$(hash_of "$LOCAL_DIR")"
                log "postgres user cannot reach $LOCAL_DIR; keeping the cluster in $alt (symlinked from $PG_LINK)"
                rmdir "$PG_LINK"
                mkdir -p "$alt"
                ln -s "$alt" "$PG_LINK"
                printf '%s\n' "$LOCAL_DIR" >"$alt/owner-local-dir"
            fi
        fi
    fi
    pg_resolve_paths
    mkdir -p "$PG_DATA" "$PG_SOCK"
    if [ "$IS_ROOT" -eq 1 ]; then
        chown "$PG_OS_USER": "$PG_HOME" "$PG_DATA" "$PG_SOCK"
        chmod 700 "$PG_HOME" "$PG_DATA"; chmod 755 "$PG_SOCK"
        touch "$PG_LOG"; chown "$PG_OS_USER": "$PG_LOG"
        as_pg test -w "$PG_DATA" || die "postgres OS user cannot write $PG_DATA"
    fi
}

pg_pid() {
    pg_resolve_paths
    # postmaster.pid may be stale (killed machine); pg_ctl copes with that itself.
    live_pid "$PG_DATA/postmaster.pid" postgres
}

# A real query as the application user over TCP.
pg_answers() {
    PGPASSWORD="$DB_PASSWORD" PGCONNECT_TIMEOUT=3 timeout 10 "${PGBIN:+$PGBIN/}psql" -X -q -t -A -w \
        -h "$HOST" -p "$PG_PORT" -U "$DB_USER" -d "$DB_NAME" -c 'select 1' 2>/dev/null | grep -qx 1
}

# Superuser psql over our unix socket (peer auth as the postgres OS user).
pg_super() {
    as_pg "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$PG_SOCK" -p "$PG_PORT" -U "$PG_OS_USER" -d postgres
}

pg_write_conf() {
    # Rewritten on every start so port changes via LB_PG_PORT take effect.
    cat >"$PG_DATA/leaderboard.conf" <<EOF
# Written by scripts/services.sh on every start; do not edit.
listen_addresses = '$HOST'
port = $PG_PORT
unix_socket_directories = '$PG_SOCK'
max_connections = 200
shared_buffers = 256MB
# Durability settings (fsync, synchronous_commit, full_page_writes) stay at defaults.
log_min_duration_statement = -1
log_line_prefix = '%m [%p] %q%u@%d '
EOF
    [ "$IS_ROOT" -eq 1 ] && chown "$PG_OS_USER": "$PG_DATA/leaderboard.conf"
    return 0
}

# If Debian's system cluster holds our port, stop it (it is not ours).
pg_stop_system_cluster_on_port() {
    command -v pg_lsclusters >/dev/null 2>&1 || return 1
    local ver name port status datadir stopped=1
    while read -r ver name port status _owner datadir _; do
        [ "$port" = "$PG_PORT" ] && [ "$status" = online ] || continue
        [ "$(readlink -f "$datadir")" = "$(readlink -f "$PG_DATA")" ] && continue
        log "Debian system cluster $ver/$name (data $datadir) is running on port $PG_PORT; stopping it (pg_ctlcluster $ver $name stop)"
        pg_ctlcluster "$ver" "$name" stop && stopped=0
    done < <(pg_lsclusters -h 2>/dev/null)
    return "$stopped"
}

start_postgres() {
    PGBIN="$(pg_bin_dir)"; [ -n "$PGBIN" ] || die "PostgreSQL binaries not found"
    pg_resolve_paths
    local pid
    if pid="$(pg_pid)"; then
        if wait_until 30 pg_answers; then
            log "PostgreSQL already running (pid $pid, port $PG_PORT)"; return 0
        fi
        die "PostgreSQL pid $pid is running but does not answer on $HOST:$PG_PORT as $DB_USER; see $PG_LOG"
    fi
    if port_open "$PG_PORT"; then
        if pg_answers; then
            log "PostgreSQL: already answering on port $PG_PORT, reusing (not started from $LOCAL_DIR)"
            REUSED+=(PostgreSQL); return 0
        fi
        pg_stop_system_cluster_on_port || true
        if port_open "$PG_PORT"; then
            die "port $PG_PORT is in use by another process ($(port_owner "$PG_PORT")) that is not a usable leaderboard PostgreSQL; stop it or set LB_PG_PORT"
        fi
    fi

    pg_prepare_home
    if [ ! -f "$PG_DATA/PG_VERSION" ]; then
        log "initialising PostgreSQL cluster in $PG_DATA"
        as_pg "$PGBIN/initdb" -D "$PG_DATA" -U "$PG_OS_USER" -E UTF8 --locale=C.UTF-8 \
            --auth-local=peer --auth-host=scram-sha-256 >"$PG_HOME/initdb.log" 2>&1 \
            || { show_log_tail "$PG_HOME/initdb.log"; die "initdb failed"; }
        printf "\n# project settings (scripts/services.sh)\ninclude_if_exists = 'leaderboard.conf'\n" >>"$PG_DATA/postgresql.conf"
    fi
    pg_write_conf

    log "starting PostgreSQL on $HOST:$PG_PORT"
    # 9>&-: daemons must not inherit the lock fd (see take_lock).
    as_pg "$PGBIN/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -w -t "$START_TIMEOUT" start >/dev/null 9>&- \
        || { show_log_tail "$PG_LOG"; die "PostgreSQL failed to start; see $PG_LOG"; }

    # Role and database (idempotent). CREATEDB: the test runner creates test_leaderboard.
    pg_super >/dev/null <<SQL || { show_log_tail "$PG_LOG"; die "could not create role/database; see $PG_LOG"; }
DO \$\$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$DB_USER') THEN
    CREATE ROLE $DB_USER LOGIN CREATEDB PASSWORD '$DB_PASSWORD';
  ELSE
    ALTER ROLE $DB_USER LOGIN CREATEDB PASSWORD '$DB_PASSWORD';
  END IF;
END
\$\$;
SELECT 'CREATE DATABASE $DB_NAME OWNER $DB_USER'
 WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '$DB_NAME')\gexec
SQL
    if ! wait_until "$START_TIMEOUT" pg_answers; then
        show_log_tail "$PG_LOG"
        die "PostgreSQL started but 'select 1' as $DB_USER@$HOST:$PG_PORT fails; see $PG_LOG"
    fi
    log "PostgreSQL ready (pid $(pg_pid || echo '?'))"
}

stop_postgres() {
    PGBIN="$(pg_bin_dir)"
    local pid
    if ! pid="$(pg_pid)"; then log "PostgreSQL not running"; return 0; fi
    log "stopping PostgreSQL (pid $pid)"
    as_pg "$PGBIN/pg_ctl" -D "$PG_DATA" -m fast -w -t 60 stop >/dev/null \
        || die "pg_ctl stop failed; see $PG_LOG"
}

# ----------------------------------------------------------------------------
# Redis
# ----------------------------------------------------------------------------
redis_answers() {
    # timeout: a foreign listener that never replies must not hang us.
    [ "$(timeout 5 redis-cli -h "$HOST" -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ]
}

redis_pid() { live_pid "$REDIS_PID" redis-server; }

write_redis_conf() {
    mkdir -p "$REDIS_DIR"
    cat >"$REDIS_CONF" <<EOF
# Written by scripts/services.sh on every start; do not edit.
bind $HOST
port $REDIS_PORT
protected-mode yes
daemonize yes
pidfile "$REDIS_PID"
logfile "$REDIS_LOG"
dir "$REDIS_DIR"
# Redis is rebuildable from PostgreSQL, but keep persistence in dev anyway.
appendonly yes
appendfsync everysec
save 3600 1 300 100 60 10000
EOF
}

start_redis() {
    local pid
    if pid="$(redis_pid)"; then
        if wait_until 15 redis_answers; then
            log "Redis already running (pid $pid, port $REDIS_PORT)"; return 0
        fi
        die "Redis pid $pid is running but does not answer PING on $HOST:$REDIS_PORT; see $REDIS_LOG"
    fi
    rm -f "$REDIS_PID"
    if port_open "$REDIS_PORT"; then
        if redis_answers; then
            local cfg
            cfg="$(timeout 5 redis-cli -h "$HOST" -p "$REDIS_PORT" info server 2>/dev/null | tr -d '\r' | sed -n 's/^config_file://p')"
            if [ "$cfg" = /etc/redis/redis.conf ] && [ "$IS_ROOT" -eq 1 ]; then
                log "Debian's system redis-server is running on port $REDIS_PORT; stopping it (service redis-server stop)"
                service redis-server stop >/dev/null 2>&1 || redis-cli -h "$HOST" -p "$REDIS_PORT" shutdown >/dev/null 2>&1 || true
                wait_until 15 bash -c "! (exec 3<>/dev/tcp/$HOST/$REDIS_PORT)" || true
            else
                log "Redis: already answering on port $REDIS_PORT, reusing (not started from $LOCAL_DIR)"
                REUSED+=(Redis); return 0
            fi
        fi
        if port_open "$REDIS_PORT"; then
            die "port $REDIS_PORT is in use by another process ($(port_owner "$REDIS_PORT")) that does not answer Redis PING; stop it or set LB_REDIS_PORT"
        fi
    fi
    write_redis_conf
    log "starting Redis on $HOST:$REDIS_PORT"
    redis-server "$REDIS_CONF" >>"$REDIS_LOG" 2>&1 </dev/null 9>&- \
        || { show_log_tail "$REDIS_LOG"; die "redis-server failed to start; see $REDIS_LOG"; }
    if ! wait_until "$START_TIMEOUT" redis_answers; then
        show_log_tail "$REDIS_LOG"; die "Redis did not answer PING on $HOST:$REDIS_PORT within ${START_TIMEOUT}s; see $REDIS_LOG"
    fi
    wait_until 10 redis_pid || true
    log "Redis ready (pid $(redis_pid || echo '?'))"
}

stop_redis() {
    local pid
    if ! pid="$(redis_pid)"; then rm -f "$REDIS_PID"; log "Redis not running"; return 0; fi
    log "stopping Redis (pid $pid)"
    # SIGTERM = graceful SHUTDOWN (flushes the AOF). Only ever our own pid:
    # the port may belong to another checkout's Redis.
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_until 30 bash -c "! kill -0 $pid"; then
        log "Redis did not exit in 30s, killing"; kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$REDIS_PID"
}

# ----------------------------------------------------------------------------
# Kafka
# ----------------------------------------------------------------------------
kafka_pid() { live_pid "$KAFKA_PID" kafka.Kafka; }

VENV_PY="$ROOT/.venv/bin/python"
# A real metadata request with kafka-python. Exit 99 = this venv cannot do the
# check at all (missing/old/broken kafka-python): switch to the java client
# instead of timing out.
KAFKA_PY_CHECK='
import sys
try:
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaConfigurationError
except Exception:
    sys.exit(99)
want = dict(bootstrap_servers=sys.argv[1], client_id="lb-services-check",
            request_timeout_ms=5000, bootstrap_timeout_ms=3000,
            api_version_auto_timeout_ms=3000)
# Only pass options this kafka-python version knows (3.0.12 has
# bootstrap_timeout_ms; 2.x had api_version_auto_timeout_ms).
known = getattr(KafkaAdminClient, "DEFAULT_CONFIG", want)
try:
    a = KafkaAdminClient(**{k: v for k, v in want.items() if k in known})
except (KafkaConfigurationError, TypeError):
    sys.exit(99)
try:
    a.list_topics()
finally:
    a.close()
'
kafka_checker="${LB_KAFKA_CHECKER:-}"   # "python" or "java"; decided once unless forced
kafka_pick_checker() {
    [ -n "$kafka_checker" ] && return 0
    if [ -x "$VENV_PY" ] && "$VENV_PY" -c 'import kafka' >/dev/null 2>&1; then
        kafka_checker=python
    else
        kafka_checker=java
    fi
}

# A real metadata request against the broker.
kafka_answers() { kafka_answers_on "$HOST:$KAFKA_PORT"; }

# A real metadata request against the broker at $1 (host:port).
kafka_answers_on() {
    local addr="$1"
    kafka_pick_checker
    if [ "$kafka_checker" = python ]; then
        local rc=0
        timeout 20 "$VENV_PY" -c "$KAFKA_PY_CHECK" "$addr" >/dev/null 2>&1 || rc=$?
        [ "$rc" -ne 99 ] && return "$rc"
        log "the .venv's kafka-python cannot run the readiness check; using the java client"
        kafka_checker=java
    fi
    if [ "$kafka_checker" = java ]; then
        [ -d "$KAFKA_LIBS" ] || return 1
        local cfg="$KAFKA_DIR/check-client.properties"
        # Short timeouts: an AdminClient otherwise waits 60s for a down broker.
        [ -f "$cfg" ] || printf 'request.timeout.ms=3000\ndefault.api.timeout.ms=5000\n' >"$cfg"
        # TopicCommand --list = a Metadata request via the AdminClient. No log4j
        # config: log4j2's default (errors to the console) is discarded here.
        timeout 30 java -Xshare:auto -XX:TieredStopAtLevel=1 -Xmx128m \
            -cp "$KAFKA_LIBS/*" org.apache.kafka.tools.TopicCommand \
            --bootstrap-server "$addr" --command-config "$cfg" --list >/dev/null 2>&1
    fi
}

kafka_fetch_libs() {
    local want have=""
    want="$(sha256sum "$KAFKA_POM" | cut -d' ' -f1)"
    [ -f "$KAFKA_LIBS/.stamp" ] && have="$(cat "$KAFKA_LIBS/.stamp")"
    if [ "$want" = "$have" ] && ls "$KAFKA_LIBS"/kafka_2.13-*.jar >/dev/null 2>&1; then
        return 0
    fi
    log "fetching Kafka jars from Maven Central into $KAFKA_LIBS (first run: ~1 min)..."
    rm -rf "$KAFKA_LIBS"; mkdir -p "$KAFKA_LIBS" "$KAFKA_LOGS"
    local t0=$SECONDS
    if ! mvn -B -q -Dstyle.color=never -f "$KAFKA_POM" dependency:copy-dependencies \
            -DoutputDirectory="$KAFKA_LIBS" >"$KAFKA_LOGS/maven.log" 2>&1; then
        show_log_tail "$KAFKA_LOGS/maven.log"
        rm -rf "$KAFKA_LIBS"
        die "maven could not fetch the Kafka jars; see $KAFKA_LOGS/maven.log"
    fi
    printf '%s\n' "$want" >"$KAFKA_LIBS/.stamp"
    log "Kafka jars ready ($(ls "$KAFKA_LIBS" | wc -l) jars, $((SECONDS - t0))s)"
}

kafka_write_props() {
    [ -f "$KAFKA_TEMPLATE" ] || die "missing $KAFKA_TEMPLATE"
    mkdir -p "$KAFKA_DATA"
    local esc_data
    esc_data="$(printf '%s' "$KAFKA_DATA" | sed 's/[\\&|]/\\&/g')"
    sed -e "s|@KAFKA_PORT@|$KAFKA_PORT|g" \
        -e "s|@KAFKA_CONTROLLER_PORT@|$KAFKA_CONTROLLER_PORT|g" \
        -e "s|@KAFKA_FAULTS_PORT@|$KAFKA_FAULTS_PORT|g" \
        -e "s|@KAFKA_FAULTS_PROXY_PORT@|$KAFKA_FAULTS_PROXY_PORT|g" \
        -e "s|@KAFKA_DATA_DIR@|$esc_data|g" \
        "$KAFKA_TEMPLATE" >"$KAFKA_PROPS"
}

kafka_java() {
    java -Xshare:auto -Djava.awt.headless=true \
        -Dlog4j2.configurationFile="$KAFKA_LOG4J" -Dkafka.logs.dir="$KAFKA_LOGS" \
        -cp "$KAFKA_LIBS/*" "$@"
}

kafka_format() {
    [ -f "$KAFKA_DATA/meta.properties" ] && return 0
    local cid
    if [ -s "$KAFKA_DIR/cluster.id" ]; then
        cid="$(cat "$KAFKA_DIR/cluster.id")"
    else
        cid="$(kafka_java kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n1 | tr -d '[:space:]')"
        [ -n "$cid" ] || die "kafka StorageTool random-uuid failed"
        printf '%s\n' "$cid" >"$KAFKA_DIR/cluster.id"
    fi
    log "formatting Kafka storage in $KAFKA_DATA (cluster id $cid)"
    # --standalone: single-node dynamic KRaft quorum (needs
    # controller.quorum.bootstrap.servers, not controller.quorum.voters).
    kafka_java kafka.tools.StorageTool format --standalone -t "$cid" -c "$KAFKA_PROPS" \
        >"$KAFKA_LOGS/format.log" 2>&1 \
        || { show_log_tail "$KAFKA_LOGS/format.log"; die "kafka storage format failed; see $KAFKA_LOGS/format.log"; }
    printf '%s %s\n' "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT" >"$KAFKA_DIR/formatted-ports"
}

start_kafka() {
    local pid
    mkdir -p "$KAFKA_LOGS"
    if pid="$(kafka_pid)"; then
        # Never refetch jars under a running broker (the pom may have changed).
        if wait_until "$START_TIMEOUT" kafka_answers; then
            log "Kafka already running (pid $pid, port $KAFKA_PORT)"; return 0
        fi
        die "Kafka pid $pid is running but does not answer on $HOST:$KAFKA_PORT; see $KAFKA_LOGS/server.log"
    fi
    rm -f "$KAFKA_PID"
    if port_open "$KAFKA_PORT"; then
        kafka_pick_checker
        if [ "$kafka_checker" = java ]; then kafka_fetch_libs; fi   # the java checker needs the jars
        if kafka_answers; then
            log "Kafka: already answering on port $KAFKA_PORT, reusing (not started from $LOCAL_DIR)"
            REUSED+=(Kafka); return 0
        fi
        die "port $KAFKA_PORT is in use by another process ($(port_owner "$KAFKA_PORT")) that does not answer as Kafka; stop it or set LB_KAFKA_PORT"
    fi
    if port_open "$KAFKA_CONTROLLER_PORT"; then
        die "Kafka controller port $KAFKA_CONTROLLER_PORT is in use ($(port_owner "$KAFKA_CONTROLLER_PORT")); stop it or set LB_KAFKA_CONTROLLER_PORT"
    fi
    if port_open "$KAFKA_FAULTS_PORT"; then
        die "Kafka faults listener port $KAFKA_FAULTS_PORT is in use ($(port_owner "$KAFKA_FAULTS_PORT")); stop it or set LB_KAFKA_FAULTS_PORT"
    fi

    kafka_fetch_libs
    kafka_write_props
    if [ -f "$KAFKA_DIR/formatted-ports" ] && [ "$(cat "$KAFKA_DIR/formatted-ports")" != "$KAFKA_PORT $KAFKA_CONTROLLER_PORT" ]; then
        log "WARNING: Kafka storage was formatted for ports $(cat "$KAFKA_DIR/formatted-ports"); if it fails to start, delete $KAFKA_DATA"
    fi
    kafka_format

    log "starting Kafka 4.3.1 (KRaft) on $HOST:$KAFKA_PORT"
    # setsid + nohup + closed fds: the broker must not keep the caller's
    # terminal/pipes open, nor die with its process group.
    (
        cd "$KAFKA_DIR"
        exec setsid nohup java -Xms512m -Xmx1g -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
            -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
            -Dlog4j2.configurationFile="$KAFKA_LOG4J" -Dkafka.logs.dir="$KAFKA_LOGS" \
            -cp "$KAFKA_LIBS/*" kafka.Kafka "$KAFKA_PROPS" \
            </dev/null >>"$KAFKA_OUT" 2>&1 9>&-
    ) &
    pid=$!
    printf '%s\n' "$pid" >"$KAFKA_PID"

    local deadline=$((SECONDS + START_TIMEOUT))
    while ! kafka_answers; do
        if ! pid_alive "$pid"; then
            rm -f "$KAFKA_PID"
            show_log_tail "$KAFKA_LOGS/server.log"; show_log_tail "$KAFKA_OUT"
            die "Kafka exited during startup; see $KAFKA_LOGS/server.log and $KAFKA_OUT"
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            show_log_tail "$KAFKA_LOGS/server.log"
            die "Kafka did not answer a metadata request on $HOST:$KAFKA_PORT within ${START_TIMEOUT}s (pid $pid still running); see $KAFKA_LOGS/server.log"
        fi
        sleep 0.5
    done
    # $pid is the subshell that exec'd setsid+nohup+java; setsid does not fork
    # when the caller is not a process-group leader, so it is normally the JVM.
    # Double-check and fall back to looking the JVM up by its config path.
    if ! kafka_pid >/dev/null; then
        pid="$(pgrep -n -f -- "kafka.Kafka $KAFKA_PROPS" || true)"
        [ -n "$pid" ] && printf '%s\n' "$pid" >"$KAFKA_PID"
    fi
    log "Kafka ready (pid $(kafka_pid || echo '?'), checked with the $kafka_checker client)"
}

stop_kafka() {
    local pid
    if ! pid="$(kafka_pid)"; then rm -f "$KAFKA_PID"; log "Kafka not running"; return 0; fi
    log "stopping Kafka (pid $pid; up to 30s for a controlled shutdown)"
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_until 30 bash -c "! kill -0 $pid"; then
        log "Kafka did not exit within 30s, sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        wait_until 10 bash -c "! kill -0 $pid" || true
    fi
    rm -f "$KAFKA_PID"
}

# ----------------------------------------------------------------------------
# Redis Cluster (LB_REDIS_MODE=cluster): three masters and three replicas
# ----------------------------------------------------------------------------
# One redis-server per port, REDIS_CLUSTER_PORT .. REDIS_CLUSTER_PORT+5, each with
# its own folder $LOCAL_DIR/redis-cluster/<port>/ (redis.conf, nodes.conf, the AOF,
# redis.pid, redis.log). The standalone Redis on REDIS_PORT keeps running: Celery's
# broker and Django's cache stay there (see README, "Running on clusters").
rc_ports() { local i; for i in 0 1 2 3 4 5; do printf '%s\n' "$((REDIS_CLUSTER_PORT + i))"; done; }
rc_dir() { printf '%s\n' "$REDIS_CLUSTER_DIR/$1"; }
rc_pid() { live_pid "$(rc_dir "$1")/redis.pid" "redis-server"; }
rc_cli() { local port="$1"; shift; timeout 5 redis-cli -h "$HOST" -p "$port" "$@" 2>/dev/null | tr -d '\r'; }
rc_answers() { [ "$(rc_cli "$1" ping)" = PONG ]; }
rc_is_cluster_node() { rc_cli "$1" info cluster | grep -qx 'cluster_enabled:1'; }
rc_info_field() { rc_cli "$1" cluster info | sed -n "s/^$2://p"; }
rc_state_ok() { [ "$(rc_info_field "$1" cluster_state)" = ok ]; }

# cluster_state:ok, six known nodes, all 16384 slots assigned, as seen from $1.
rc_healthy_from() {
    local port="$1"
    rc_state_ok "$port" &&
        [ "$(rc_info_field "$port" cluster_known_nodes)" = 6 ] &&
        [ "$(rc_info_field "$port" cluster_slots_assigned)" = 16384 ]
}
# Every node answers and sees a healthy cluster.
rc_all_healthy() {
    local p
    for p in $(rc_ports); do rc_healthy_from "$p" || return 1; done
}

rc_write_conf() {
    local port="$1" dir
    dir="$(rc_dir "$port")"
    mkdir -p "$dir"
    cat >"$dir/redis.conf" <<CONF
# Written by scripts/services.sh on every start of this node; do not edit.
bind $HOST
port $port
protected-mode yes
daemonize yes
pidfile "$dir/redis.pid"
logfile "$dir/redis.log"
dir "$dir"
cluster-enabled yes
cluster-config-file nodes.conf
# A master that does not answer for 2 s is failed over: a failover takes seconds.
cluster-node-timeout 2000
# 0: a replica is always eligible for promotion, however long it has been cut off from
# its master (the boards are rebuildable from PostgreSQL; availability first).
cluster-replica-validity-factor 0
cluster-require-full-coverage yes
appendonly yes
appendfsync everysec
save ""
CONF
}

# Start one node (no-op when it already runs). Never touches a foreign process.
rc_start_node() {
    local port="$1" dir pid
    dir="$(rc_dir "$port")"
    if pid="$(rc_pid "$port")"; then
        wait_until 15 rc_answers "$port" \
            || die "Redis cluster node $port (pid $pid) runs but does not answer PING; see $dir/redis.log"
        return 0
    fi
    if port_open "$port"; then
        if rc_answers "$port" && rc_is_cluster_node "$port"; then
            log "Redis cluster node $port: already answering (not started from $LOCAL_DIR), reusing"
            REUSED+=("redis-cluster:$port"); return 0
        fi
        die "port $port is in use by another process ($(port_owner "$port")) that is not a Redis cluster node; stop it or set LB_REDIS_CLUSTER_PORT"
    fi
    rm -f "$dir/redis.pid"
    rc_write_conf "$port"
    redis-server "$dir/redis.conf" >>"$dir/redis.log" 2>&1 </dev/null 9>&- 8>&- \
        || { show_log_tail "$dir/redis.log"; die "redis-server (cluster node $port) failed to start; see $dir/redis.log"; }
    if ! wait_until "$START_TIMEOUT" rc_answers "$port"; then
        show_log_tail "$dir/redis.log"; die "Redis cluster node $port did not answer PING within ${START_TIMEOUT}s; see $dir/redis.log"
    fi
    wait_until 10 rc_pid "$port" || true
    log "Redis cluster node $port started (pid $(rc_pid "$port" || echo '?'))"
}

start_redis_cluster() {
    have redis-cli || die "redis-cli missing"
    local p fresh=1
    for p in $(rc_ports); do rc_start_node "$p"; done
    # Created already (by an earlier run): every node knows the other five.
    if rc_all_healthy || wait_until 15 rc_all_healthy; then
        log "Redis Cluster ready on $HOST:$REDIS_CLUSTER_PORT-$((REDIS_CLUSTER_PORT + 5)) (reused)"
        return 0
    fi
    for p in $(rc_ports); do
        if [ "$(rc_info_field "$p" cluster_known_nodes)" != 1 ] || [ "$(rc_info_field "$p" cluster_slots_assigned)" != 0 ]; then
            fresh=0
        fi
    done
    if [ "$fresh" -eq 1 ]; then
        log "creating the Redis Cluster (3 masters, 3 replicas)"
        local addrs=()
        for p in $(rc_ports); do addrs+=("$HOST:$p"); done
        redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes \
            >"$REDIS_CLUSTER_DIR/create.log" 2>&1 \
            || { show_log_tail "$REDIS_CLUSTER_DIR/create.log"; die "redis-cli --cluster create failed; see $REDIS_CLUSTER_DIR/create.log"; }
    else
        log "the Redis Cluster exists but is not healthy yet (a failover or a node catching up?); waiting"
    fi
    if ! wait_until "$START_TIMEOUT" rc_all_healthy; then
        for p in $(rc_ports); do
            log "node $p: state=$(rc_info_field "$p" cluster_state) known_nodes=$(rc_info_field "$p" cluster_known_nodes) slots_assigned=$(rc_info_field "$p" cluster_slots_assigned)"
        done
        die "the Redis Cluster did not reach cluster_state:ok with 6 nodes within ${START_TIMEOUT}s (state under $REDIS_CLUSTER_DIR; if it was half-created, stop-clusters and delete that folder)"
    fi
    log "Redis Cluster ready on $HOST:$REDIS_CLUSTER_PORT-$((REDIS_CLUSTER_PORT + 5))"
}

rc_stop_node() {
    local port="$1" pid
    pid="$(rc_pid "$port")" || { rm -f "$(rc_dir "$port")/redis.pid"; return 0; }
    log "stopping Redis cluster node $port (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_until 30 bash -c "! kill -0 $pid"; then
        log "Redis cluster node $port did not exit in 30s, killing"; kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$(rc_dir "$port")/redis.pid"
}

stop_redis_cluster() {
    local p
    for p in $(rc_ports); do rc_stop_node "$p"; done
}

rc_role() {
    local role
    role="$(rc_cli "$1" role | head -n1)"
    case "$role" in master) echo master ;; slave) echo replica ;; *) echo "${role:-down}" ;; esac
}

rc_check_port() {
    local port="$1" p
    [[ "$port" =~ ^[0-9]+$ ]] || die "not a port: $port"
    for p in $(rc_ports); do [ "$p" = "$port" ] && return 0; done
    die "$port is not a port of the local Redis Cluster ($(rc_ports | tr '\n' ' '))"
}

cmd_redis_cluster_kill() {
    local port="${1:-}" pid role
    rc_check_port "$port"
    pid="$(rc_pid "$port")" || die "Redis cluster node $port is not running from $LOCAL_DIR (no live pid in $(rc_dir "$port")/redis.pid)"
    role="$(rc_role "$port")"
    kill -KILL "$pid"
    wait_until 10 bash -c "! kill -0 $pid" || die "Redis cluster node $port (pid $pid) survived SIGKILL"
    echo "killed Redis cluster node $port (pid $pid, was $role) with SIGKILL"
}

cmd_redis_cluster_start() {
    local port="${1:-}" pid
    rc_check_port "$port"
    if pid="$(rc_pid "$port")"; then
        echo "Redis cluster node $port already running (pid $pid, $(rc_role "$port"))"; return 0
    fi
    rc_start_node "$port"
    # It rejoins: it reads its nodes.conf and gossips with the others.
    wait_until "$START_TIMEOUT" rc_healthy_from "$port" \
        || die "Redis cluster node $port started but does not see a healthy cluster within ${START_TIMEOUT}s; see $(rc_dir "$port")/redis.log"
    echo "started Redis cluster node $port (pid $(rc_pid "$port" || echo '?'), now $(rc_role "$port"))"
}

# ----------------------------------------------------------------------------
# Kafka cluster (LB_KAFKA_BROKERS=3): three KRaft nodes, each broker+controller
# ----------------------------------------------------------------------------
# Node n (1..3): client port KAFKA_CLUSTER_PORT+n-1, controller port
# KAFKA_CLUSTER_CONTROLLER_PORT+n-1, folder $LOCAL_DIR/kafka-cluster/<n>/ (data/,
# logs/, server.properties, kafka.pid). Same jars as the single broker.
kc_nodes() { printf '1\n2\n3\n'; }
kc_dir() { printf '%s\n' "$KAFKA_CLUSTER_DIR/$1"; }
kc_port() { printf '%s\n' "$((KAFKA_CLUSTER_PORT + $1 - 1))"; }
kc_cport() { printf '%s\n' "$((KAFKA_CLUSTER_CONTROLLER_PORT + $1 - 1))"; }
kc_pid() { live_pid "$(kc_dir "$1")/kafka.pid" "kafka.Kafka $(kc_dir "$1")/server.properties"; }
kc_bootstrap() { local n out=""; for n in $(kc_nodes); do out+="${out:+,}$HOST:$(kc_port "$n")"; done; printf '%s\n' "$out"; }
kc_voters() { local n out=""; for n in $(kc_nodes); do out+="${out:+,}$n@$HOST:$(kc_cport "$n")"; done; printf '%s\n' "$out"; }

# Exit 0 when the brokers reachable through $1 (bootstrap list) number at least $2.
KAFKA_PY_BROKERS='
import sys
try:
    from kafka import KafkaAdminClient
except Exception:
    sys.exit(99)
want = dict(bootstrap_servers=sys.argv[1].split(","), client_id="lb-services-check",
            request_timeout_ms=5000, bootstrap_timeout_ms=3000,
            api_version_auto_timeout_ms=3000)
known = getattr(KafkaAdminClient, "DEFAULT_CONFIG", want)
try:
    a = KafkaAdminClient(**{k: v for k, v in want.items() if k in known})
except Exception:
    sys.exit(1)
try:
    brokers = a.describe_cluster()["brokers"]
finally:
    a.close()
# A restarted broker is listed (fenced) before it has caught up; count only unfenced ones.
sys.exit(0 if sum(not b.get("is_fenced") for b in brokers) >= int(sys.argv[2]) else 1)
'
# $1 = bootstrap list, $2 = how many brokers must be registered.
kc_brokers_registered() {
    kafka_pick_checker
    if [ "$kafka_checker" = python ]; then
        local rc=0
        timeout 20 "$VENV_PY" -c "$KAFKA_PY_BROKERS" "$1" "$2" >/dev/null 2>&1 || rc=$?
        [ "$rc" -ne 99 ] && return "$rc"
        kafka_checker=java
    fi
    local cfg="$KAFKA_CLUSTER_DIR/check-client.properties" count
    [ -f "$cfg" ] || printf 'request.timeout.ms=3000\ndefault.api.timeout.ms=5000\n' >"$cfg"
    # One "host:port (id: N rack: ...) -> (" line per registered broker.
    count="$(timeout 30 java -Xshare:auto -XX:TieredStopAtLevel=1 -Xmx128m -cp "$KAFKA_LIBS/*" \
        org.apache.kafka.tools.BrokerApiVersionsCommand --bootstrap-server "$1" \
        --command-config "$cfg" 2>/dev/null | grep -c '(id: ' || true)"
    [ "${count:-0}" -ge "$2" ]
}
kc_all_registered() { kc_brokers_registered "$(kc_bootstrap)" 3; }
# Node $1 answers on its own port and the cluster it sees has all three brokers.
kc_node_ready() { kc_brokers_registered "$HOST:$(kc_port "$1")" 3; }

kc_write_props() {
    local n="$1" dir esc_data
    dir="$(kc_dir "$n")"
    mkdir -p "$dir/data" "$dir/logs"
    local tpl="$ROOT/infra/kafka/cluster-node.properties.template"
    [ -f "$tpl" ] || die "missing $tpl"
    esc_data="$(printf '%s' "$dir/data" | sed 's/[\\&|]/\\&/g')"
    sed -e "s|@NODE_ID@|$n|g" \
        -e "s|@KAFKA_PORT@|$(kc_port "$n")|g" \
        -e "s|@KAFKA_CONTROLLER_PORT@|$(kc_cport "$n")|g" \
        -e "s|@KAFKA_VOTERS@|$(kc_voters)|g" \
        -e "s|@KAFKA_DATA_DIR@|$esc_data|g" \
        "$tpl" >"$dir/server.properties"
}

kc_format() {
    local n="$1" dir cid
    dir="$(kc_dir "$n")"
    [ -f "$dir/data/meta.properties" ] && return 0
    # One cluster id for the three nodes, chosen once.
    if [ -s "$KAFKA_CLUSTER_DIR/cluster.id" ]; then
        cid="$(cat "$KAFKA_CLUSTER_DIR/cluster.id")"
    else
        cid="$(kafka_java kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n1 | tr -d '[:space:]')"
        [ -n "$cid" ] || die "kafka StorageTool random-uuid failed"
        printf '%s\n' "$cid" >"$KAFKA_CLUSTER_DIR/cluster.id"
    fi
    log "formatting Kafka node $n storage in $dir/data (cluster id $cid)"
    # Static quorum (controller.quorum.voters): no --standalone / --initial-controllers.
    kafka_java kafka.tools.StorageTool format -t "$cid" -c "$dir/server.properties" \
        >"$dir/logs/format.log" 2>&1 \
        || { show_log_tail "$dir/logs/format.log"; die "kafka storage format (node $n) failed; see $dir/logs/format.log"; }
    printf '%s %s\n' "$(kc_port "$n")" "$(kc_cport "$n")" >"$dir/formatted-ports"
}

# Launch node $1 (no-op when it runs); does not wait for it.
kc_launch_node() {
    local n="$1" dir pid port cport
    dir="$(kc_dir "$n")"; port="$(kc_port "$n")"; cport="$(kc_cport "$n")"
    if pid="$(kc_pid "$n")"; then return 0; fi
    rm -f "$dir/kafka.pid"
    local p
    for p in "$port" "$cport"; do
        if port_open "$p"; then
            die "Kafka node $n: port $p is in use ($(port_owner "$p")) and node $n is not running from $LOCAL_DIR; stop it or set LB_KAFKA_CLUSTER_PORT / LB_KAFKA_CLUSTER_CONTROLLER_PORT"
        fi
    done
    kc_write_props "$n"
    if [ -f "$dir/formatted-ports" ] && [ "$(cat "$dir/formatted-ports")" != "$port $cport" ]; then
        log "WARNING: Kafka node $n was formatted for ports $(cat "$dir/formatted-ports"); if it fails to start, delete $KAFKA_CLUSTER_DIR"
    fi
    kc_format "$n"
    log "starting Kafka node $n (KRaft broker+controller) on $HOST:$port, controller :$cport"
    (
        cd "$dir"
        exec setsid nohup java -Xms256m -Xmx512m -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
            -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
            -Dlog4j2.configurationFile="$KAFKA_LOG4J" -Dkafka.logs.dir="$dir/logs" \
            -cp "$KAFKA_LIBS/*" kafka.Kafka "$dir/server.properties" \
            </dev/null >>"$dir/logs/kafka.out" 2>&1 9>&- 8>&-
    ) &
    printf '%s\n' "$!" >"$dir/kafka.pid"
}

# Wait until "$@" (a command) succeeds while the nodes listed in $1 stay alive.
kc_wait_nodes() {
    local nodes="$1"; shift
    local n dir pid deadline=$((SECONDS + START_TIMEOUT))
    while ! "$@" >/dev/null 2>&1; do
        for n in $nodes; do
            dir="$(kc_dir "$n")"
            # The raw pid: right after the launch it may not have exec'd java yet.
            pid="$(head -n1 "$dir/kafka.pid" 2>/dev/null | tr -dc '0-9')"
            if ! pid_alive "$pid"; then
                rm -f "$dir/kafka.pid"
                show_log_tail "$dir/logs/server.log"; show_log_tail "$dir/logs/kafka.out"
                die "Kafka node $n exited during startup; see $dir/logs/server.log and $dir/logs/kafka.out"
            fi
        done
        if [ "$SECONDS" -ge "$deadline" ]; then
            for n in $nodes; do show_log_tail "$(kc_dir "$n")/logs/server.log"; done
            die "Kafka node(s) $nodes did not become ready within ${START_TIMEOUT}s; see $KAFKA_CLUSTER_DIR/<n>/logs/server.log"
        fi
        sleep 0.5
    done
}

start_kafka_cluster() {
    local n running=0
    for n in $(kc_nodes); do kc_pid "$n" >/dev/null && running=$((running + 1)); done
    if [ "$running" -eq 3 ] && wait_until 30 kc_all_registered; then
        log "Kafka cluster already running (3 brokers on $(kc_bootstrap))"; return 0
    fi
    # Started from another checkout (its pid files live there): reuse it when all three answer
    # and see each other, as the single services are reused; this checkout's stop leaves it.
    if [ "$running" -eq 0 ] && port_open "$(kc_port 1)" && kc_all_registered; then
        log "Kafka cluster: 3 brokers already answering on $(kc_bootstrap), reusing (not started from $LOCAL_DIR)"
        for n in $(kc_nodes); do REUSED+=("kafka-cluster:$(kc_port "$n")"); done
        return 0
    fi
    mkdir -p "$KAFKA_CLUSTER_DIR"
    kafka_fetch_libs
    for n in $(kc_nodes); do kc_launch_node "$n"; done
    # The quorum needs two voters up before any broker registers: launch all, then wait.
    kc_wait_nodes "$(kc_nodes | tr '\n' ' ')" kc_all_registered
    log "Kafka cluster ready: 3 brokers registered on $(kc_bootstrap) (pids $(for n in $(kc_nodes); do printf '%s ' "$(kc_pid "$n" || echo '?')"; done))"
}

kc_stop_node() {
    local n="$1" pid
    pid="$(kc_pid "$n")" || { rm -f "$(kc_dir "$n")/kafka.pid"; return 0; }
    log "stopping Kafka node $n (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_until 30 bash -c "! kill -0 $pid"; then
        log "Kafka node $n did not exit within 30s, sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        wait_until 10 bash -c "! kill -0 $pid" || true
    fi
    rm -f "$(kc_dir "$n")/kafka.pid"
}

stop_kafka_cluster() {
    # All three at once: stopped one by one, the last ones wait for a quorum that is gone.
    local n pids=()
    for n in $(kc_nodes); do
        if kc_pid "$n" >/dev/null; then kc_stop_node "$n" & pids+=("$!"); fi
    done
    local p rc=0
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    return "$rc"
}

kc_check_node() {
    case "${1:-}" in 1|2|3) ;; *) die "not a Kafka cluster node: '${1:-}' (1, 2 or 3)" ;; esac
}

cmd_kafka_broker_kill() {
    local n="${1:-}" pid
    kc_check_node "$n"
    pid="$(kc_pid "$n")" || die "Kafka node $n is not running from $LOCAL_DIR (no live pid in $(kc_dir "$n")/kafka.pid)"
    kill -KILL "$pid"
    wait_until 10 bash -c "! kill -0 $pid" || die "Kafka node $n (pid $pid) survived SIGKILL"
    rm -f "$(kc_dir "$n")/kafka.pid"
    echo "killed Kafka node $n (pid $pid, $HOST:$(kc_port "$n")) with SIGKILL"
}

cmd_kafka_broker_start() {
    local n="${1:-}" pid
    kc_check_node "$n"
    if pid="$(kc_pid "$n")"; then echo "Kafka node $n already running (pid $pid)"; return 0; fi
    kafka_fetch_libs
    kc_launch_node "$n"
    kc_wait_nodes "$n" kc_node_ready "$n"
    echo "started Kafka node $n (pid $(kc_pid "$n" || echo '?'), $HOST:$(kc_port "$n")); 3 brokers registered"
}

# ----------------------------------------------------------------------------
# commands
# ----------------------------------------------------------------------------
print_summary() {
    cat <<EOF

Local services (state in $LOCAL_DIR):
  DATABASE_URL=postgres://$DB_USER:$DB_PASSWORD@$HOST:$PG_PORT/$DB_NAME
  REDIS_URL=redis://$HOST:$REDIS_PORT/0
  KAFKA_BOOTSTRAP_SERVERS=$HOST:$KAFKA_PORT
EOF
    if [ "$REDIS_MODE" = cluster ]; then
        echo "  Redis Cluster (boards, LB_REDIS_MODE=cluster): $HOST:$REDIS_CLUSTER_PORT-$((REDIS_CLUSTER_PORT + 5)); state in $REDIS_CLUSTER_DIR"
    fi
    if [ "$KAFKA_BROKERS" = 3 ]; then
        echo "  Kafka cluster (LB_KAFKA_BROKERS=3): $(kc_bootstrap); state in $KAFKA_CLUSTER_DIR"
    fi
    local logs=() r=" ${REUSED[*]} "
    [[ "$r" == *" PostgreSQL "* ]] || logs+=("$PG_LOG")
    [[ "$r" == *" Redis "* ]] || logs+=("$REDIS_LOG")
    [[ "$r" == *" Kafka "* ]] || logs+=("$KAFKA_LOGS/server.log")
    if [ "${#logs[@]}" -gt 0 ]; then echo "Logs: ${logs[*]}"; fi
    echo "Stop with: $0 stop"
    if [ "${#REUSED[@]}" -gt 0 ]; then
        echo "Reused (already running from another checkout; this checkout's 'stop' leaves them alone): ${REUSED[*]}"
    fi
}

# One start/stop at a time per set of ports: several worktrees (each with its
# own LOCAL_DIR, or sharing one) run `make test` in parallel against the same
# ports, and must not race to start the same service twice.
LOCK_FILE="${TMPDIR:-/tmp}/lb-services-$PG_PORT-$REDIS_PORT-$KAFKA_PORT.lock"
take_lock() {
    command -v flock >/dev/null 2>&1 || return 0
    { exec 9>>"$LOCK_FILE"; } 2>/dev/null || return 0
    if ! flock -n 9; then
        log "waiting for another services.sh run (lock $LOCK_FILE)..."
        flock -w 900 9 || die "another services.sh still holds $LOCK_FILE after 15 min"
    fi
}

# The cluster nodes have their own lock (fd 8): killing and restarting one node for a
# failover test must not wait for another checkout's `start` of the shared services.
CLUSTER_LOCK_FILE="${TMPDIR:-/tmp}/lb-services-clusters-$REDIS_CLUSTER_PORT-$KAFKA_CLUSTER_PORT.lock"
take_cluster_lock() {
    command -v flock >/dev/null 2>&1 || return 0
    { exec 8>>"$CLUSTER_LOCK_FILE"; } 2>/dev/null || return 0
    if ! flock -n 8; then
        log "waiting for another services.sh run on the clusters (lock $CLUSTER_LOCK_FILE)..."
        flock -w 900 8 || die "another services.sh still holds $CLUSTER_LOCK_FILE after 15 min"
    fi
}

# True when a cluster node of this LOCAL_DIR runs (then `status` reports that cluster).
rc_any_running() { local p; for p in $(rc_ports); do rc_pid "$p" >/dev/null && return 0; done; return 1; }
kc_any_running() { local n; for n in $(kc_nodes); do kc_pid "$n" >/dev/null && return 0; done; return 1; }

cmd_start() {
    take_lock
    ensure_installed
    start_postgres
    start_redis
    start_kafka
    if [ "$REDIS_MODE" = cluster ] || [ "$KAFKA_BROKERS" = 3 ]; then
        take_cluster_lock
        [ "$REDIS_MODE" = cluster ] && start_redis_cluster
        [ "$KAFKA_BROKERS" = 3 ] && start_kafka_cluster
    fi
    print_summary
    log "all services up (${SECONDS}s)"
}

cmd_stop_clusters() {
    local rc=0
    take_cluster_lock
    stop_kafka_cluster || rc=1
    stop_redis_cluster || rc=1
    return "$rc"
}

cmd_stop() {
    # Reverse order; keep going if one fails.
    local rc=0
    cmd_stop_clusters || rc=1
    take_lock
    stop_kafka || rc=1
    stop_redis || rc=1
    if command -v pg_ctl >/dev/null 2>&1 || [ -n "$(pg_bin_dir)" ]; then stop_postgres || rc=1; fi
    return "$rc"
}

status_line() {
    # name, pid-or-empty, port, answers(0/1)
    local name="$1" pid="$2" port="$3" ans="$4" state
    if [ -n "$pid" ]; then
        state="running"
    elif [ "$ans" -eq 0 ]; then
        state="running (external)"   # answering, but not started from this LOCAL_DIR
    else
        state="stopped"
    fi
    printf '%-9s %-19s pid=%-8s port=%-6s %s\n' "$name" "$state" "${pid:--}" "$port" \
        "$([ "$ans" -eq 0 ] && echo answering || echo 'not answering')"
}

cmd_status() {
    local ok=0 pid ans
    pid="$(pg_pid || true)"
    if pg_answers; then ans=0; else ans=1; ok=3; fi
    status_line postgres "$pid" "$PG_PORT" "$ans"

    pid="$(redis_pid || true)"
    if have redis-cli && redis_answers; then ans=0; else ans=1; ok=3; fi
    status_line redis "$pid" "$REDIS_PORT" "$ans"

    pid="$(kafka_pid || true)"
    if port_open "$KAFKA_PORT" && kafka_answers; then ans=0; else ans=1; ok=3; fi
    status_line kafka "$pid" "$KAFKA_PORT" "$ans"

    local p n state
    if [ "$REDIS_MODE" = cluster ] || rc_any_running; then
        for p in $(rc_ports); do
            pid="$(rc_pid "$p" || true)"
            if have redis-cli && rc_answers "$p"; then ans=0; else ans=1; ok=3; fi
            status_line "rc:$p" "$pid" "$p" "$ans"
        done
        state="$(for p in $(rc_ports); do s="$(rc_info_field "$p" cluster_state)"; [ -n "$s" ] && { echo "$s"; break; }; done)"
        [ "$state" = ok ] || ok=3
        printf 'redis-cluster: cluster_state=%s, masters: %s\n' "${state:-unknown}" \
            "$(for p in $(rc_ports); do [ "$(rc_role "$p")" = master ] && printf '%s ' "$p"; done)"
    fi
    if [ "$KAFKA_BROKERS" = 3 ] || kc_any_running; then
        for n in $(kc_nodes); do
            pid="$(kc_pid "$n" || true)"
            if port_open "$(kc_port "$n")" && kafka_answers_on "$HOST:$(kc_port "$n")"; then ans=0; else ans=1; ok=3; fi
            status_line "kafka-$n" "$pid" "$(kc_port "$n")" "$ans"
        done
    fi
    return "$ok"
}

usage() {
    echo "usage: $0 start|stop|status|stop-clusters|redis-cluster-kill PORT|redis-cluster-start PORT|kafka-broker-kill N|kafka-broker-start N" >&2
    exit 2
}

pg_resolve_paths
PGBIN="$(pg_bin_dir)"

case "${1:-}" in
    start)  cmd_start ;;
    stop)   cmd_stop ;;
    status) cmd_status ;;
    stop-clusters)       cmd_stop_clusters ;;
    redis-cluster-kill)  take_cluster_lock; cmd_redis_cluster_kill "${2:-}" ;;
    redis-cluster-start) take_cluster_lock; cmd_redis_cluster_start "${2:-}" ;;
    kafka-broker-kill)   take_cluster_lock; cmd_kafka_broker_kill "${2:-}" ;;
    kafka-broker-start)  take_cluster_lock; cmd_kafka_broker_start "${2:-}" ;;
    *)      usage ;;
esac
