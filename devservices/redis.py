"""The standalone Redis on 127.0.0.1:LB_REDIS_PORT (the boards in single mode; Django's cache
and Celery's broker in both modes), state in LOCAL_DIR/redis/."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

from devservices import health, ports
from devservices.config import HOST, Config
from devservices.errors import ServiceError, log, show_log_tail
from devservices.processes import is_root, live_pid, pid_alive, terminate, wait_until
from devservices.render import redis_conf

NAME = "Redis"
DEBIAN_CONFIG = "/etc/redis/redis.conf"


def pid_file(config: Config) -> Path:
    return config.redis_dir / "redis.pid"


def log_file(config: Config) -> Path:
    return config.redis_dir / "redis.log"


def running_pid(config: Config) -> int | None:
    return live_pid(pid_file(config), "redis-server")


def answers(config: Config) -> bool:
    return health.redis_answers(config.redis_port)


def launch(conf: Path, log_path: Path, what: str) -> None:
    """redis-server with ``conf`` (daemonize yes: it returns once the daemon forked)."""
    with log_path.open("a") as out:
        done = subprocess.run(
            ["redis-server", str(conf)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if done.returncode != 0:
        show_log_tail(log_path)
        raise ServiceError(f"redis-server ({what}) failed to start; see {log_path}")


def _stop_debian_redis(config: Config) -> None:
    log(
        f"Debian's system redis-server is running on port {config.redis_port}; stopping it "
        "(service redis-server stop)"
    )
    done = subprocess.run(["service", "redis-server", "stop"], capture_output=True, check=False)
    if done.returncode != 0:
        # The connection drops as it shuts down.
        with contextlib.suppress(OSError, health.ProtocolError):
            health.redis_command(config.redis_port, "SHUTDOWN")
    wait_until(15, lambda: not ports.port_open(config.redis_port))


def start(config: Config) -> bool:
    """Start it, or reuse the one answering on the port; True when reused (not ours)."""
    pid = running_pid(config)
    if pid is not None:
        if wait_until(15, lambda: answers(config)):
            log(f"Redis already running (pid {pid}, port {config.redis_port})")
            return False
        raise ServiceError(
            f"Redis pid {pid} is running but does not answer PING on {HOST}:{config.redis_port}; "
            f"see {log_file(config)}"
        )
    pid_file(config).unlink(missing_ok=True)
    if ports.port_open(config.redis_port):
        if answers(config):
            served = health.redis_info(config.redis_port, "INFO", "server").get("config_file")
            if served == DEBIAN_CONFIG and is_root():
                _stop_debian_redis(config)
            else:
                log(
                    f"Redis: already answering on port {config.redis_port}, reusing "
                    f"(not started from {config.local_dir})"
                )
                return True
        if ports.port_open(config.redis_port):
            raise ServiceError(
                f"port {config.redis_port} is in use by another process "
                f"({ports.port_owner(config.redis_port)}) that does not answer Redis PING; "
                "stop it or set LB_REDIS_PORT"
            )
    config.redis_dir.mkdir(parents=True, exist_ok=True)
    conf = config.redis_dir / "redis.conf"
    conf.write_text(redis_conf(port=config.redis_port, directory=config.redis_dir))
    log(f"starting Redis on {HOST}:{config.redis_port}")
    launch(conf, log_file(config), "standalone")
    if not wait_until(config.start_timeout, lambda: answers(config)):
        show_log_tail(log_file(config))
        raise ServiceError(
            f"Redis did not answer PING on {HOST}:{config.redis_port} within "
            f"{config.start_timeout:.0f}s; see {log_file(config)}"
        )
    wait_until(10, lambda: running_pid(config))
    log(f"Redis ready (pid {running_pid(config) or '?'})")
    return False


def stop_pid(pid: int | None, pid_path: Path, what: str) -> None:
    """SIGTERM = a graceful SHUTDOWN (flushes the AOF). Only ever our own pid: the port may
    belong to another checkout's Redis."""
    if pid is not None and pid_alive(pid):
        log(f"stopping {what} (pid {pid})")
        terminate(pid, what)
    pid_path.unlink(missing_ok=True)


def stop(config: Config) -> None:
    pid = running_pid(config)
    if pid is None:
        pid_file(config).unlink(missing_ok=True)
        log("Redis not running")
        return
    stop_pid(pid, pid_file(config), "Redis")
