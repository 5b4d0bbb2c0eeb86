"""Pid files, liveness, polling, stopping our own processes, and running as the PostgreSQL OS
user. A process is ours only when its pid file names a live process whose command line matches:
a port may belong to another checkout's service, which is never signalled."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from devservices.errors import ServiceError, log

POLL_SECONDS = 0.5


def is_root() -> bool:
    return os.geteuid() == 0


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pid_running(pid: int | None) -> bool:
    """Alive and not a zombie (a child that exited and was not reaped yet by this process)."""
    if not pid_alive(pid):
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no procfs: kill -0 is all there is
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def read_pid(pid_file: Path) -> int | None:
    """The first line's digits (postmaster.pid and redis.pid alike), or None."""
    try:
        first = pid_file.read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    digits = "".join(c for c in first if c.isdigit())
    return int(digits) if digits else None


def cmdline(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


def live_pid(pid_file: Path, pattern: str) -> int | None:
    """The pid in ``pid_file`` when it is alive and its command line contains ``pattern``.

    A zombie or a recycled pid has another (or an empty) command line: not ours."""
    pid = read_pid(pid_file)
    if pid is None or not pid_alive(pid):
        return None
    return pid if pattern in cmdline(pid) else None


def wait_until(timeout: float, condition: Callable[[], object]) -> bool:
    """Poll ``condition`` until it is truthy (an exception counts as not yet)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if condition():
                return True
        except Exception:  # noqa: S110 (a service coming up refuses, resets, times out)
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_SECONDS)


def terminate(pid: int, what: str, timeout: float = 30) -> None:
    """SIGTERM (a graceful shutdown for Redis and Kafka), SIGKILL after ``timeout`` seconds."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    if not wait_until(timeout, lambda: not pid_alive(pid)):
        log(f"{what} did not exit within {timeout:.0f}s, sending SIGKILL")
        kill_hard(pid)
        wait_until(10, lambda: not pid_alive(pid))


def kill_hard(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def kill_and_wait(pid: int, what: str) -> None:
    """SIGKILL (a crash, for the failover tests) and wait until the process is gone."""
    kill_hard(pid)
    if not wait_until(10, lambda: not pid_running(pid)):
        raise ServiceError(f"{what} (pid {pid}) survived SIGKILL")


def pg_os_user() -> str:
    """postgres refuses to run as root: as root the cluster belongs to the `postgres` user."""
    if is_root():
        return "postgres"
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name


def as_pg_command(args: Sequence[str], user: str, root: bool | None = None) -> list[str]:
    """``args`` run as the PostgreSQL OS user (runuser, else su), or as they are when not root."""
    if not (is_root() if root is None else root):
        return list(args)
    if shutil.which("runuser"):
        return ["runuser", "-u", user, "--", *args]
    import shlex

    return ["su", "-s", "/bin/sh", user, "-c", shlex.join(args)]


def run_as_pg(
    args: Sequence[str],
    *,
    input_text: str | None = None,
    timeout: float | None = None,
    capture: bool = False,
    log_to: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run as the PostgreSQL OS user, from / (the caller's directory may be one that user
    cannot enter, a 0700 clone under /tmp; every path handed over is absolute). Output: captured,
    appended to ``log_to``, or discarded."""
    command = as_pg_command(args, pg_os_user())
    if log_to is not None:
        with log_to.open("a") as out:
            return subprocess.run(
                command,
                cwd="/",
                input=input_text,
                text=True,
                timeout=timeout,
                check=False,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
    return subprocess.run(
        command,
        cwd="/",
        input=input_text,
        text=True,
        timeout=timeout,
        check=False,
        stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
        stderr=subprocess.PIPE if capture else subprocess.DEVNULL,
    )


def have(program: str) -> bool:
    return shutil.which(program) is not None
