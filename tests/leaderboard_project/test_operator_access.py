"""/metrics and /metrics.json answer operators only: METRICS_ALLOWED_NETWORKS or staff.

The client address is the throttle's: REMOTE_ADDR, or behind API_TRUSTED_PROXY_COUNT proxies the
X-Forwarded-For entry the outermost one wrote.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from leaderboard_project.access import OPERATORS_ONLY_DETAIL, address_allowed

pytestmark = pytest.mark.django_db

ENDPOINTS = ["/metrics", "/metrics.json"]
DEFAULT_NETWORKS = "127.0.0.0/8,::1/128,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fc00::/7"


def _assert_refused(response) -> None:
    assert response.status_code == 403
    assert response.json() == {"detail": OPERATORS_ONLY_DETAIL}


@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize(
    "address", ["127.0.0.1", "10.1.2.3", "172.31.255.1", "192.168.0.7", "::1", "fd00::5"]
)
def test_the_internal_network_is_served(client, path, address) -> None:
    assert client.get(path, REMOTE_ADDR=address).status_code == 200


@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("address", ["203.0.113.9", "8.8.8.8", "172.32.0.1", "2001:db8::1", ""])
def test_anyone_else_is_refused(client, path, address) -> None:
    _assert_refused(client.get(path, REMOTE_ADDR=address))


@pytest.mark.parametrize("path", ENDPOINTS)
def test_staff_are_served_from_anywhere(client, admin_user, path) -> None:
    client.force_login(admin_user)
    assert client.get(path, REMOTE_ADDR="203.0.113.9").status_code == 200


@pytest.mark.parametrize("path", ENDPOINTS)
def test_a_forged_forwarded_for_header_changes_nothing_without_trusted_proxies(
    client, path
) -> None:
    response = client.get(path, REMOTE_ADDR="203.0.113.9", HTTP_X_FORWARDED_FOR="127.0.0.1")
    _assert_refused(response)


@pytest.mark.parametrize("path", ENDPOINTS)
def test_behind_a_trusted_proxy_the_address_it_saw_decides(client, settings, path) -> None:
    settings.API_TRUSTED_PROXY_COUNT = 1
    proxy = "10.0.0.2"
    # A public client through the proxy: the proxy's own private address is not the client's.
    _assert_refused(client.get(path, REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR="203.0.113.9"))
    # ... nor is what the client wrote left of the entry the proxy appended.
    forged = "127.0.0.1, 203.0.113.9"
    _assert_refused(client.get(path, REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR=forged))
    # An internal client through the proxy, and a scraper that reaches the process directly.
    ok = client.get(path, REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR="10.9.8.7")
    assert ok.status_code == 200
    assert client.get(path, REMOTE_ADDR="127.0.0.1").status_code == 200


@pytest.mark.parametrize("path", ENDPOINTS)
def test_the_networks_are_a_setting(client, settings, path) -> None:
    settings.METRICS_ALLOWED_NETWORKS = ["203.0.113.0/24"]
    assert client.get(path, REMOTE_ADDR="203.0.113.9").status_code == 200
    _assert_refused(client.get(path, REMOTE_ADDR="127.0.0.1"))


def test_address_allowed() -> None:
    networks = DEFAULT_NETWORKS.split(",")
    assert address_allowed("::ffff:127.0.0.1", networks)  # IPv4 on a dual-stack listener
    assert address_allowed("fc00::1", networks)
    assert not address_allowed("::ffff:203.0.113.9", networks)
    assert not address_allowed("not-an-address", networks)
    assert not address_allowed("127.0.0.1", [])
    assert address_allowed("198.51.100.4", ["198.51.100.4"])


def test_a_malformed_network_stops_the_process() -> None:
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "DJANGO_DEBUG": "true", "METRICS_ALLOWED_NETWORKS": "10.0.0.0/8,10.1/33"}
    done = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "METRICS_ALLOWED_NETWORKS: '10.1/33'" in done.stderr
