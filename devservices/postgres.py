"""PostgreSQL: a cluster of this checkout's own under LOCAL_DIR/postgres, the `leaderboard` role
and database, on 127.0.0.1:LB_PG_PORT.

When the `postgres` OS user cannot reach LOCAL_DIR (the checkout under a root-only 0700 folder
such as /root), the cluster lives in ~postgres/lb-<hash of LOCAL_DIR> (/var/tmp if that is
unusable) and LOCAL_DIR/postgres is a symlink to it.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from devservices import ports
from devservices.config import DB_NAME, DB_PASSWORD, DB_USER, HOST, Config
from devservices.errors import ServiceError, log, show_log_tail
from devservices.installs import pg_bin_dir
from devservices.processes import is_root, live_pid, pg_os_user, run_as_pg, wait_until
from devservices.render import POSTGRES_INCLUDE, postgres_bootstrap_sql, postgres_conf

NAME = "PostgreSQL"


@dataclass(frozen=True)
class PgPaths:
    home: Path  # the resolved (real) cluster folder
    data: Path
    socket_dir: Path
    log: Path


def paths(config: Config) -> PgPaths:
    link = config.pg_link
    home = Path(os.path.realpath(link)) if link.is_symlink() else link
    return PgPaths(
        home=home, data=home / "data", socket_dir=home / "run", log=home / "postgres.log"
    )


def _bin(config: Config) -> Path:
    found = pg_bin_dir(config)
    if found is None:
        raise ServiceError("PostgreSQL binaries not found")
    return found


def running_pid(config: Config) -> int | None:
    # postmaster.pid may be stale (a killed machine): pg_ctl copes with that itself.
    return live_pid(paths(config).data / "postmaster.pid", "postgres")


def answers(config: Config) -> bool:
    """A real query as the application user over TCP."""
    pg = pg_bin_dir(config)
    psql = str(pg / "psql") if pg else shutil.which("psql")
    if psql is None:
        return False
    env = {**os.environ, "PGPASSWORD": DB_PASSWORD, "PGCONNECT_TIMEOUT": "3"}
    try:
        done = subprocess.run(
            [
                psql,
                "-X",
                "-q",
                "-t",
                "-A",
                "-w",
                "-h",
                HOST,
                "-p",
                str(config.pg_port),
                "-U",
                DB_USER,
                "-d",
                DB_NAME,
                "-c",
                "select 1",
            ],
            capture_output=True,
            text=True,
            timeout=10,
            env=env,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and done.stdout.strip() == "1"


def _chown(path: Path, user: str) -> None:
    entry = pwd.getpwnam(user)
    os.chown(path, entry.pw_uid, entry.pw_gid)


def _pg_can(path: Path, test: str) -> bool:
    return run_as_pg(["test", *test.split(), str(path)]).returncode == 0


def _prepare_home(config: Config) -> PgPaths:
    """Decide where the cluster lives (first start only); make it usable by the postgres user."""
    user = pg_os_user()
    config.local_dir.mkdir(parents=True, exist_ok=True)
    link = config.pg_link
    if link.is_symlink():
        Path(os.readlink(link)).mkdir(parents=True, exist_ok=True)
    elif not link.exists():
        link.mkdir(parents=True)
        if is_root():
            _chown(link, user)
            link.chmod(0o700)
            if not (_pg_can(link, "-w") and _pg_can(link, "-x")):
                # Keep it in the postgres user's home (not /var/tmp, which systemd-tmpfiles
                # ages out after 30 days).
                base = Path(pwd.getpwnam(user).pw_dir)
                if not all(_pg_can(base, t) for t in ("-d", "-w", "-x")):
                    base = Path("/var/tmp")  # noqa: S108 (a folder the postgres user can use)
                digest = hashlib.sha256(str(config.local_dir).encode()).hexdigest()[:12]
                alt = base / f"lb-{digest}"
                log(
                    f"postgres user cannot reach {config.local_dir}; keeping the cluster in "
                    f"{alt} (symlinked from {link})"
                )
                link.rmdir()
                alt.mkdir(parents=True, exist_ok=True)
                link.symlink_to(alt)
                (alt / "owner-local-dir").write_text(f"{config.local_dir}\n")
    where = paths(config)
    where.data.mkdir(parents=True, exist_ok=True)
    where.socket_dir.mkdir(parents=True, exist_ok=True)
    if is_root():
        for folder in (where.home, where.data, where.socket_dir):
            _chown(folder, user)
        where.home.chmod(0o700)
        where.data.chmod(0o700)
        where.socket_dir.chmod(0o755)
        where.log.touch()
        _chown(where.log, user)
        if not _pg_can(where.data, "-w"):
            raise ServiceError(f"postgres OS user cannot write {where.data}")
    return where


def _stop_system_cluster_on_port(config: Config) -> None:
    """Debian's system cluster holding our port is not ours: stop it."""
    if not shutil.which("pg_lsclusters"):
        return
    ours = os.path.realpath(paths(config).data)
    listing = subprocess.run(["pg_lsclusters", "-h"], capture_output=True, text=True, check=False)
    for line in listing.stdout.splitlines():
        fields = line.split()
        if len(fields) < 6:
            continue
        version, name, port, status, datadir = fields[0], fields[1], fields[2], fields[3], fields[5]
        if port != str(config.pg_port) or status != "online" or os.path.realpath(datadir) == ours:
            continue
        log(
            f"Debian system cluster {version}/{name} (data {datadir}) is running on port "
            f"{config.pg_port}; stopping it (pg_ctlcluster {version} {name} stop)"
        )
        subprocess.run(["pg_ctlcluster", version, name, "stop"], check=False)


def start(config: Config) -> bool:
    """Start it, or reuse the one answering on the port; True when reused (not ours)."""
    pg = _bin(config)
    where = paths(config)
    pid = running_pid(config)
    if pid is not None:
        if wait_until(30, lambda: answers(config)):
            log(f"PostgreSQL already running (pid {pid}, port {config.pg_port})")
            return False
        raise ServiceError(
            f"PostgreSQL pid {pid} is running but does not answer on {HOST}:{config.pg_port} "
            f"as {DB_USER}; see {where.log}"
        )
    if ports.port_open(config.pg_port):
        if answers(config):
            log(
                f"PostgreSQL: already answering on port {config.pg_port}, reusing "
                f"(not started from {config.local_dir})"
            )
            return True
        _stop_system_cluster_on_port(config)
        if ports.port_open(config.pg_port):
            raise ServiceError(
                f"port {config.pg_port} is in use by another process "
                f"({ports.port_owner(config.pg_port)}) that is not a usable leaderboard "
                "PostgreSQL; stop it or set LB_PG_PORT"
            )

    where = _prepare_home(config)
    user = pg_os_user()
    if not (where.data / "PG_VERSION").is_file():
        log(f"initialising PostgreSQL cluster in {where.data}")
        initdb_log = where.home / "initdb.log"
        initdb_log.unlink(missing_ok=True)
        done = run_as_pg(
            [
                str(pg / "initdb"),
                "-D",
                str(where.data),
                "-U",
                user,
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
                "--auth-local=peer",
                "--auth-host=scram-sha-256",
            ],
            log_to=initdb_log,
        )
        if done.returncode != 0:
            show_log_tail(initdb_log)
            raise ServiceError("initdb failed")
        with (where.data / "postgresql.conf").open("a") as conf:
            conf.write(POSTGRES_INCLUDE)
    conf_path = where.data / "leaderboard.conf"
    conf_path.write_text(postgres_conf(port=config.pg_port, socket_dir=where.socket_dir))
    if is_root():
        _chown(conf_path, user)

    log(f"starting PostgreSQL on {HOST}:{config.pg_port}")
    timeout = str(int(config.start_timeout))
    started = run_as_pg(
        [
            str(pg / "pg_ctl"),
            "-D",
            str(where.data),
            "-l",
            str(where.log),
            "-w",
            "-t",
            timeout,
            "start",
        ]
    )
    if started.returncode != 0:
        show_log_tail(where.log)
        raise ServiceError(f"PostgreSQL failed to start; see {where.log}")

    sql = postgres_bootstrap_sql(user=DB_USER, password=DB_PASSWORD, database=DB_NAME)
    created = run_as_pg(
        [
            str(pg / "psql"),
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            str(where.socket_dir),
            "-p",
            str(config.pg_port),
            "-U",
            user,
            "-d",
            "postgres",
        ],
        input_text=sql,
    )
    if created.returncode != 0:
        show_log_tail(where.log)
        raise ServiceError(f"could not create role/database; see {where.log}")
    if not wait_until(config.start_timeout, lambda: answers(config)):
        show_log_tail(where.log)
        raise ServiceError(
            f"PostgreSQL started but 'select 1' as {DB_USER}@{HOST}:{config.pg_port} fails; "
            f"see {where.log}"
        )
    log(f"PostgreSQL ready (pid {running_pid(config) or '?'})")
    return False


def stop(config: Config) -> None:
    pid = running_pid(config)
    if pid is None:
        log("PostgreSQL not running")
        return
    log(f"stopping PostgreSQL (pid {pid})")
    where = paths(config)
    done = run_as_pg(
        [
            str(_bin(config) / "pg_ctl"),
            "-D",
            str(where.data),
            "-m",
            "fast",
            "-w",
            "-t",
            "60",
            "stop",
        ]
    )
    if done.returncode != 0:
        raise ServiceError(f"pg_ctl stop failed; see {where.log}")
