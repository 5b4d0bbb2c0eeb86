"""Prometheus and promtool for the tests: installed by devservices, run on free ports."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from django.conf import settings

from devservices import prometheus

REPO = Path(settings.BASE_DIR)
ALERTS = REPO / "infra" / "prometheus" / "alerts.yml"


def ensure_prometheus() -> None:
    """Debian's package, installed when missing (a no-op when it is there)."""
    prometheus.ensure_installed()
    assert shutil.which("prometheus")
    assert shutil.which("promtool")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def promtool(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["promtool", *args], input=stdin, capture_output=True, timeout=60)


class PrometheusServer:
    """A Prometheus of the test's own: private port, data folder and scrape config."""

    def __init__(self, *, workdir: Path, scrape_configs: list[dict[str, Any]]) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.log = workdir / "prometheus.log"
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(ALERTS)],
            "scrape_configs": scrape_configs,
        }
        # JSON is YAML: no YAML writer needed.
        (workdir / "prometheus.yml").write_text(json.dumps(config))
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [
                    "prometheus",
                    f"--config.file={self.workdir / 'prometheus.yml'}",
                    f"--storage.tsdb.path={self.workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdout=out,
                stderr=out,
            )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def api(self, path: str, **params: str) -> Any:
        """GET /api/v1/<path>; None while the server does not answer yet."""
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                body = json.load(response)
        except OSError:
            return None
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector of ``expr`` (empty while nothing matches or before it answers)."""
        data = self.api("query", query=expr)
        return [] if data is None else list(data["result"])

    def value(self, expr: str) -> float | None:
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None

    def log_tail(self, lines: int = 30) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "prometheus log (tail):\n" + "\n".join(text.splitlines()[-lines:])
