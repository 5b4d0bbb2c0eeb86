"""Installing only what is missing: Debian packages through apt-get (their system services kept
from starting: they would collide on our ports) and the Kafka jars from Maven Central."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from devservices.config import Config
from devservices.errors import ServiceError, log, show_log_tail
from devservices.processes import have, is_root

POLICY_RC_D = Path("/usr/sbin/policy-rc.d")


def missing_message(packages: Sequence[str], who: str) -> str:
    names = " ".join(packages)
    return f"{who}: missing packages: {names} (run as root or: sudo apt-get install -y {names})"


def apt_install(packages: Sequence[str], *, who: str, no_services: bool = True) -> None:
    """apt-get install ``packages``; with ``no_services``, maintainer scripts may not start
    the packages' system services (invoke-rc.d and deb-systemd-invoke honour policy-rc.d's
    exit code 101)."""
    if not is_root():
        raise ServiceError(missing_message(packages, who))
    if not have("apt-get"):
        raise ServiceError(f"{who}: missing packages: {' '.join(packages)} and no apt-get")
    created_policy = False
    if no_services and not POLICY_RC_D.exists():
        POLICY_RC_D.write_text("#!/bin/sh\nexit 101\n")
        POLICY_RC_D.chmod(0o755)
        created_policy = True
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    # Another apt-get (a parallel install) holds the lock for a while: wait for it.
    apt = ["apt-get", "-o", "DPkg::Lock::Timeout=600"]
    handle, name = tempfile.mkstemp(prefix="lb-services-apt.", suffix=".log")
    aptlog = Path(name)
    try:
        with os.fdopen(handle, "w") as out:
            ok = (
                subprocess.run([*apt, "update", "-qq"], stdout=out, stderr=out, env=env).returncode
                == 0
                and subprocess.run(
                    [
                        *apt,
                        "install",
                        "-y",
                        "-qq",
                        "--no-install-recommends",
                        "-o",
                        "Dpkg::Options::=--force-confdef",
                        "-o",
                        "Dpkg::Options::=--force-confold",
                        *packages,
                    ],
                    stdout=out,
                    stderr=out,
                    env=env,
                ).returncode
                == 0
            )
    finally:
        if created_policy:
            POLICY_RC_D.unlink(missing_ok=True)
    if not ok:
        show_log_tail(aptlog)
        raise ServiceError(f"apt-get install {' '.join(packages)} failed (full log: {aptlog})")
    aptlog.unlink(missing_ok=True)


def pg_bin_dir(config: Config) -> Path | None:
    """LB_PG_BIN, else the newest /usr/lib/postgresql/<version>/bin with an initdb."""
    if config.pg_bin is not None:
        return config.pg_bin
    found = []
    for candidate in Path("/usr/lib/postgresql").glob("*/bin"):
        version = candidate.parent.name
        if (candidate / "initdb").is_file() and version.replace(".", "").isdigit():
            found.append((tuple(int(p) for p in version.split(".")), candidate))
    return max(found)[1] if found else None


def _stop_system_services(installed: Sequence[str]) -> None:
    """Belt and braces: a package's system service that ran anyway is stopped and kept from
    coming back at boot."""
    if "postgresql" in installed and have("pg_lsclusters"):
        listing = subprocess.run(
            ["pg_lsclusters", "-h"], capture_output=True, text=True, check=False
        ).stdout
        for line in listing.splitlines():
            fields = line.split()
            if len(fields) < 4:
                continue
            version, name, status = fields[0], fields[1], fields[3]
            start_conf = Path(f"/etc/postgresql/{version}/{name}/start.conf")
            if start_conf.is_file():
                start_conf.write_text("manual\n")
            if status == "online":
                log(f"stopping Debian's system cluster {version}/{name} started by the install")
                subprocess.run(["pg_ctlcluster", version, name, "stop"], check=False)
    if "redis-server" in installed:
        pid_file = Path("/run/redis/redis-server.pid")
        if pid_file.is_file():
            log("stopping Debian's system redis-server started by the package install")
            subprocess.run(["service", "redis-server", "stop"], capture_output=True, check=False)
        if have("systemctl"):
            subprocess.run(
                ["systemctl", "disable", "redis-server"], capture_output=True, check=False
            )


def ensure_installed(config: Config) -> None:
    """PostgreSQL, Redis, a JRE and Maven (for Kafka), when one of them is missing."""
    packages = []
    pg = pg_bin_dir(config)
    if pg is None or not (pg / "psql").is_file():
        packages.append("postgresql")
    if not (have("redis-server") and have("redis-cli")):
        packages.append("redis-server")
    if not have("java"):
        packages.append("openjdk-17-jre-headless")
    if not have("mvn"):
        packages.append("maven")
    if not packages:
        return
    log(f"installing {' '.join(packages)} via apt-get (system services are NOT started)...")
    apt_install(packages, who="services")
    _stop_system_services(packages)
    for program in ("java", "mvn", "redis-server"):
        if not have(program):
            raise ServiceError(f"{program} still missing after install")
    if pg_bin_dir(config) is None:
        raise ServiceError("PostgreSQL binaries still missing after install")


def kafka_pom_digest(config: Config) -> str:
    return hashlib.sha256((config.infra_kafka / "pom.xml").read_bytes()).hexdigest()


def kafka_libs_ready(config: Config) -> bool:
    stamp = config.kafka_libs / ".stamp"
    try:
        current = stamp.read_text().strip()
    except OSError:
        return False
    return current == kafka_pom_digest(config) and any(config.kafka_libs.glob("kafka_2.13-*.jar"))


def fetch_kafka_libs(config: Config) -> None:
    """The jars infra/kafka/pom.xml names, copied by Maven into LOCAL_DIR/kafka/libs (refetched
    when the pom changes; the stamp is its digest)."""
    if kafka_libs_ready(config):
        return
    libs, logs = config.kafka_libs, config.kafka_logs
    log(f"fetching Kafka jars from Maven Central into {libs} (first run: ~1 min)...")
    shutil.rmtree(libs, ignore_errors=True)
    libs.mkdir(parents=True)
    logs.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    maven_log = logs / "maven.log"
    with maven_log.open("w") as out:
        done = subprocess.run(
            [
                "mvn",
                "-B",
                "-q",
                "-Dstyle.color=never",
                "-f",
                str(config.infra_kafka / "pom.xml"),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={libs}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    if done.returncode != 0:
        show_log_tail(maven_log)
        shutil.rmtree(libs, ignore_errors=True)
        raise ServiceError(f"maven could not fetch the Kafka jars; see {maven_log}")
    (libs / ".stamp").write_text(kafka_pom_digest(config) + "\n")
    count = sum(1 for p in libs.iterdir() if p.name != ".stamp")
    log(f"Kafka jars ready ({count} jars, {time.monotonic() - started:.0f}s)")
