"""scripts/run-forever.sh: what `make run` wraps every Procfile process in (honcho stops all
processes when one exits)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from tests.helpers import wait_until

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "run-forever.sh"


def _start(tmp_path: Path, child: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["bash", str(SCRIPT), "probe", "bash", "-c", child],
        cwd=tmp_path,
        env=os.environ | {"RUN_FOREVER_BACKOFF_MIN": "1", "RUN_FOREVER_BACKOFF_MAX": "2"},
        stderr=(tmp_path / "wrapper.log").open("wb"),
        start_new_session=True,  # as honcho starts it: a process group of its own
    )


def _lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_a_child_that_exits_is_started_again_and_the_reason_logged(tmp_path) -> None:
    # Each run records its pid, then dies as a crashed worker would.
    wrapper = _start(tmp_path, "echo $$ >> runs; exit 3")
    try:
        wait_until(lambda: len(_lines(tmp_path / "runs")) >= 3, timeout=30, every=0.05)
        assert len(set(_lines(tmp_path / "runs"))) >= 3  # new processes, not one
        assert "exited with status 3" in (tmp_path / "wrapper.log").read_text()
        assert wrapper.poll() is None
    finally:
        os.killpg(wrapper.pid, signal.SIGKILL)
        wrapper.wait(timeout=10)


def test_sigterm_stops_the_child_and_the_wrapper_without_a_restart(tmp_path) -> None:
    # A long-running child that notes the SIGTERM it gets, then exits.
    child = "trap 'echo term >> got; exit 0' TERM; echo $$ >> runs; while :; do sleep 0.1; done"
    wrapper = _start(tmp_path, child)
    try:
        wait_until(lambda: len(_lines(tmp_path / "runs")) == 1, timeout=30, every=0.05)
        # honcho's Ctrl-C: SIGTERM to the wrapper's process group.
        os.killpg(wrapper.pid, signal.SIGTERM)
        assert wrapper.wait(timeout=30) == 0
    finally:
        if wrapper.poll() is None:
            os.killpg(wrapper.pid, signal.SIGKILL)
    assert "term" in _lines(tmp_path / "got")
    assert len(_lines(tmp_path / "runs")) == 1  # stopped, not started again
    pid = int(_lines(tmp_path / "runs")[0])
    wait_until(lambda: not _alive(pid), timeout=10, every=0.05)


def test_sigterm_to_the_wrapper_alone_stops_its_child(tmp_path) -> None:
    # A supervisor that signals only the wrapper's pid: the wrapper passes it on.
    wrapper = _start(tmp_path, "echo $$ >> runs; while :; do sleep 0.1; done")
    try:
        wait_until(lambda: len(_lines(tmp_path / "runs")) == 1, timeout=30, every=0.05)
        wrapper.send_signal(signal.SIGTERM)
        assert wrapper.wait(timeout=30) == 0
    finally:
        if wrapper.poll() is None:
            os.killpg(wrapper.pid, signal.SIGKILL)
    pid = int(_lines(tmp_path / "runs")[0])
    wait_until(lambda: not _alive(pid), timeout=10, every=0.05)
    assert len(_lines(tmp_path / "runs")) == 1


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
