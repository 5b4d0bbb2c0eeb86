"""The throttle keys on an address the server can trust, in bounded keys, on every public view
and page: a forged X-Forwarded-For neither escapes it nor grows Redis."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django_redis import get_redis_connection

from leaderboard import keys
from leaderboard.throttling import parse_rate, throttle_ident
from seasons.models import SeasonStatus
from tests.helpers import make_season, mark_intact

pytestmark = pytest.mark.django_db

HUGE_HEADER = ", ".join(f"10.0.{i // 256}.{i % 256}" for i in range(800))  # about 8 KB


@pytest.fixture
def two_a_day(settings):
    # A day-long window: a minute boundary mid-test would reset the count.
    settings.API_ANON_THROTTLE_RATE = "2/day"


@pytest.fixture
def intact_season():
    """An active season marked intact, its boards empty: every read answers."""
    season = make_season(status=SeasonStatus.ACTIVE)
    mark_intact(season)
    return season


def statuses(client, url: str, forwarded_for: list[str], **extra) -> list[int]:
    return [
        client.get(url, HTTP_X_FORWARDED_FOR=value, **extra).status_code for value in forwarded_for
    ]


def throttle_keys() -> list[bytes]:
    pattern = f"{django_settings.LEADERBOARD_KEY_PREFIX}:throttle:*"
    return list(get_redis_connection("default").scan_iter(match=pattern, count=1000))


def test_a_forged_forwarded_for_does_not_change_the_bucket(client, intact_season, two_a_day):
    url = f"/api/seasons/{intact_season.id}/leaderboard/top"
    forged = ["1.1.1.1", "2.2.2.2", "3.3.3.3", "4.4.4.4"]
    assert statuses(client, url, forged) == [200, 200, 429, 429]
    # The client's real address has a budget of its own.
    assert client.get(url, REMOTE_ADDR="10.9.8.7").status_code == 200


def test_behind_one_trusted_proxy_the_rightmost_hop_is_the_client(
    client, intact_season, two_a_day, settings
):
    settings.API_TRUSTED_PROXY_COUNT = 1
    url = f"/api/seasons/{intact_season.id}/leaderboard/top"
    # What the client wrote (left of the proxy's entry) changes nothing.
    same_client = ["1.1.1.1, 203.0.113.7", "9.9.9.9,203.0.113.7", "203.0.113.7"]
    assert statuses(client, url, same_client) == [200, 200, 429]
    # Another address reported by the proxy is another client, although REMOTE_ADDR (the
    # proxy) is the same.
    assert statuses(client, url, ["1.1.1.1, 203.0.113.8"]) == [200]


def test_behind_two_trusted_proxies_the_second_hop_from_the_right_is_the_client(
    client, intact_season, two_a_day, settings
):
    settings.API_TRUSTED_PROXY_COUNT = 2
    url = f"/api/seasons/{intact_season.id}/leaderboard/top"
    hops = ["6.6.6.6, 198.51.100.4, 10.0.0.1", "7.7.7.7, 198.51.100.4, 10.0.0.2"]
    assert statuses(client, url, hops + hops) == [200, 200, 429, 429]
    assert statuses(client, url, ["198.51.100.5, 10.0.0.1"]) == [200]


@pytest.mark.parametrize("forwarded", ["not-an-ip", "1.1.1.1, 999.1.1.1", "", "1.1.1.1, "])
def test_a_trusted_hop_that_is_not_an_ip_falls_back_to_remote_addr(
    client, intact_season, two_a_day, settings, forwarded
):
    settings.API_TRUSTED_PROXY_COUNT = 1
    url = f"/api/seasons/{intact_season.id}/leaderboard/top"
    # Each request also varies what a client could forge: all land in REMOTE_ADDR's bucket.
    values = [forwarded, f"5.5.5.5, {forwarded}", forwarded]
    assert statuses(client, url, values) == [200, 200, 429]


@pytest.mark.parametrize("proxies", [0, 1, 3])
def test_a_huge_header_makes_no_huge_key(client, intact_season, settings, proxies):
    settings.API_TRUSTED_PROXY_COUNT = proxies
    url = f"/api/seasons/{intact_season.id}/leaderboard/top"
    assert client.get(url, HTTP_X_FORWARDED_FOR=HUGE_HEADER + ", x" * 100).status_code == 200
    assert client.get(url, HTTP_X_FORWARDED_FOR="y" * 8192).status_code == 200
    found = throttle_keys()
    assert found
    assert max(len(key) for key in found) < len(django_settings.LEADERBOARD_KEY_PREFIX) + 120


def test_a_non_ip_remote_addr_is_hashed_into_a_bounded_key(client, intact_season, settings):
    url = f"/api/seasons/{intact_season.id}/leaderboard/top"
    assert client.get(url, REMOTE_ADDR="z" * 8192).status_code == 200
    (key,) = throttle_keys()
    assert len(key) < len(django_settings.LEADERBOARD_KEY_PREFIX) + 120


def test_throttle_key_hashes_long_idents_and_keeps_addresses():
    assert "2001:db8::1" in keys.throttle_window(scope="anon", ident="2001:db8::1", window=7)
    long_a = keys.throttle_window(scope="anon", ident="a" * 8192, window=7)
    long_b = keys.throttle_window(scope="anon", ident="a" * 8191 + "b", window=7)
    assert len(long_a) < 200
    assert long_a != long_b


# --- every public view and page is throttled ------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/seasons/{season}",
        "/seasons/{season}?player=1",
        "/api/seasons",
        "/api/seasons/{season}/standings",
        "/api/seasons/{season}/leaderboard/players/1",
        "/api/schema",
        "/api/docs",
    ],
)
def test_every_public_view_and_page_is_throttled(client, intact_season, two_a_day, path):
    url = path.format(season=intact_season.id)
    first = [client.get(url).status_code for _ in range(2)]
    assert 429 not in first
    response = client.get(url)
    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 86400
    # Another client is not affected.
    assert client.get(url, REMOTE_ADDR="10.1.2.3").status_code != 429


def test_pages_share_the_api_budget(client, intact_season, two_a_day):
    assert client.get(f"/api/seasons/{intact_season.id}/leaderboard/top").status_code == 200
    assert client.get("/").status_code == 200
    assert client.get(f"/seasons/{intact_season.id}").status_code == 429


def test_a_cache_redis_that_hangs_costs_a_request_its_socket_timeout_then_lets_it_through(
    settings, client, intact_season
) -> None:
    """The throttle's counters live in the cache Redis. One that accepts connections and never
    answers (a hung server: the kernel completes the handshake, nothing reads) costs a request
    the cache's socket timeout, then the throttle lets it through."""
    import copy
    import socket
    import time

    from django.core.cache import caches

    hung = socket.create_server(("127.0.0.1", 0), backlog=64)  # never accepts
    try:
        configured = copy.deepcopy(settings.CACHES)
        configured["default"]["LOCATION"] = f"redis://127.0.0.1:{hung.getsockname()[1]}/1"
        settings.CACHES = configured
        caches["default"]  # the handler was reset with the setting: a client for the hung one
        # Every request syncs with Redis (a limit of 100/day syncs every request).
        settings.API_ANON_THROTTLE_RATE = "100/day"
        url = f"/api/seasons/{intact_season.id}/leaderboard/top"
        started = time.monotonic()
        response = client.get(url)
        elapsed = time.monotonic() - started
    finally:
        hung.close()
    assert response.status_code == 200
    # Without the setting the client waited 5.2 s here.
    timeout = django_settings.CACHES["default"]["OPTIONS"]["SOCKET_TIMEOUT"]
    assert elapsed < timeout + 2, elapsed


@pytest.mark.parametrize(
    ("address", "ident"),
    [
        ("203.0.113.7", "203.0.113.7"),
        ("2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::/64"),
        ("2001:db8:1:2::1", "2001:db8:1:2::/64"),
        ("::ffff:203.0.113.7", "203.0.113.7"),
        ("not-an-address", "not-an-address"),
    ],
)
def test_an_ipv6_client_is_its_64_network(address, ident):
    assert throttle_ident(address) == ident


def test_addresses_of_one_ipv6_64_share_a_budget(client, intact_season, two_a_day):
    url = f"/api/seasons/{intact_season.id}/leaderboard/top"
    one_subscriber = [f"2001:db8:7:9::{n:x}" for n in range(1, 5)]
    assert [client.get(url, REMOTE_ADDR=a).status_code for a in one_subscriber] == [
        200,
        200,
        429,
        429,
    ]
    # The next /64 is someone else.
    assert client.get(url, REMOTE_ADDR="2001:db8:7:a::1").status_code == 200


@pytest.mark.parametrize(
    "rate", ["6000/week", "6000", "100/wk", "6000/month", "-5/min", "0/min", "5/", "x/min", "²/s"]
)
def test_a_malformed_rate_is_refused_naming_the_setting(rate: str) -> None:
    """DRF's reading takes the period's first letter: 6000/month was 6000 a minute, and -5/min
    refused every request."""
    with pytest.raises(ImproperlyConfigured, match="API_ANON_THROTTLE_RATE"):
        parse_rate(rate)


def test_rates_read_as_written() -> None:
    assert parse_rate("10/s") == (10, 1)
    assert parse_rate(" 6000/MIN ") == (6000, 60)
    assert parse_rate("300/day") == (300, 86400)
    assert parse_rate("2/hour") == (2, 3600)
    assert parse_rate("off") is None
