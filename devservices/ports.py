"""Whether a loopback port accepts connections, and who listens on it (for the error that tells
the user which process holds a port the services need)."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess

from devservices.config import HOST

# users:(("redis-server",pid=5186,fd=6),("redis-server",pid=5187,fd=6))
_USERS = re.compile(r"users:\(\((.*)\)\)")
_PROCESS = re.compile(r'"([^"]*)",pid=(\d+)')


def port_open(port: int, host: str = HOST, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def parse_ss_owner(output: str) -> str:
    """``name (pid N)[, ...]`` from ``ss -Hltnp`` lines; empty when ss shows no process."""
    owners: list[str] = []
    for line in output.splitlines():
        users = _USERS.search(line)
        if not users:
            continue
        for name, pid in _PROCESS.findall(users.group(1)):
            owner = f"{name} (pid {pid})"
            if owner not in owners:
                owners.append(owner)
    return ", ".join(owners)


def port_owner(port: int) -> str:
    """Best effort: who listens on ``port``, or "unknown process" when ss cannot tell."""
    ss = shutil.which("ss")
    if ss:
        try:
            done = subprocess.run(
                [ss, "-Hltnp", f"sport = :{port}"],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            done = None
        if done is not None and (owner := parse_ss_owner(done.stdout)):
            return owner
    return "unknown process"
