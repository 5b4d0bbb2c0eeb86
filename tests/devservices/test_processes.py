"""Pid files and liveness: a process is ours only when its pid file names a live process whose
command line matches; polling treats an exception as "not yet"."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from devservices import locks
from devservices.errors import ServiceError
from devservices.processes import as_pg_command, live_pid, pid_running, read_pid, wait_until


def test_read_pid_takes_the_first_lines_digits(tmp_path: Path) -> None:
    pid_file = tmp_path / "postmaster.pid"
    pid_file.write_text("5157\n/work/main/.local/postgres/data\n")
    assert read_pid(pid_file) == 5157
    pid_file.write_text("")
    assert read_pid(pid_file) is None
    assert read_pid(tmp_path / "missing.pid") is None


def test_live_pid_needs_a_live_process_with_the_expected_command_line(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "marker-x"])
    pid_file = tmp_path / "x.pid"
    pid_file.write_text(f"{child.pid}\n")
    try:
        # Right after the spawn /proc may show an empty command line for a moment.
        assert wait_until(10, lambda: live_pid(pid_file, "marker-x") == child.pid)
        # Alive, but not what the pid file is for (a recycled pid): not ours.
        assert live_pid(pid_file, "redis-server") is None
    finally:
        child.kill()
    # Killed and not reaped yet: a zombie, whose command line is empty.
    assert wait_until(10, lambda: live_pid(pid_file, "marker-x") is None)
    assert wait_until(10, lambda: not pid_running(child.pid))
    child.wait()


def test_wait_until_polls_past_exceptions() -> None:
    attempts = []

    def flaky() -> bool:
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionRefusedError
        return True

    assert wait_until(10, flaky)
    assert len(attempts) == 3
    assert not wait_until(0.1, lambda: False)


def test_as_pg_command_runs_as_the_postgres_user_only_as_root() -> None:
    assert as_pg_command(["initdb", "-D", "/d"], "me", root=False) == ["initdb", "-D", "/d"]
    as_root = as_pg_command(["initdb", "-D", "/d x"], "postgres", root=True)
    assert as_root[-3:] == ["initdb", "-D", "/d x"] or as_root[-1] == "initdb -D '/d x'"
    assert "postgres" in as_root


def test_a_second_holder_waits_for_the_lock_then_gives_up(tmp_path: Path) -> None:
    lock = tmp_path / "services.lock"
    held_now = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with locks.held(lock, "the services"):
            held_now.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held_now.wait(5)
        started = time.monotonic()
        with pytest.raises(ServiceError, match="still holds"), locks.held(lock, "x", wait=0.6):
            pass
        assert time.monotonic() - started >= 0.5
    finally:
        release.set()
        holder.join()
    with locks.held(lock, "the services"):
        assert os.path.exists(lock)
