from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext


@pytest.mark.django_db
def test_healthz_is_200_when_every_dependency_answers(client) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["status"] == "ok"
    assert body["down"] == []
    assert set(body["dependencies"]) == {"postgres", "redis", "kafka"}
    assert all(dep["ok"] for dep in body["dependencies"].values())


@pytest.mark.django_db
def test_healthz_is_503_naming_a_dead_redis(client, settings) -> None:
    caches = dict(settings.CACHES)
    caches["boards"] = {**caches["boards"], "LOCATION": "redis://127.0.0.1:1/0"}
    settings.CACHES = caches
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["down"] == ["redis"]
    assert "Connection" in body["dependencies"]["redis"]["error"]


@pytest.mark.django_db
def test_healthz_is_503_naming_a_dead_kafka(client, settings) -> None:
    settings.KAFKA_BOOTSTRAP_SERVERS = ["127.0.0.1:1"]
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["down"] == ["kafka"]


@pytest.mark.django_db
def test_the_kafka_check_keeps_one_client_and_replaces_a_failed_one(client, settings) -> None:
    from leaderboard_project import health

    assert client.get("/healthz").status_code == 200
    key = next(k for k in health._kafka_admins if k[1] == tuple(settings.KAFKA_BOOTSTRAP_SERVERS))
    first = health._kafka_admins[key]
    assert client.get("/healthz").status_code == 200
    assert health._kafka_admins[key] is first

    settings.KAFKA_BOOTSTRAP_SERVERS = ["127.0.0.1:1"]
    assert client.get("/healthz").status_code == 503
    # A client that failed is not kept for the next probe.
    assert (key[0], ("127.0.0.1:1",)) not in health._kafka_admins


PUBLIC = "203.0.113.9"  # TEST-NET-3: outside every default METRICS_ALLOWED_NETWORKS range


def _dead_redis(settings) -> None:
    caches = dict(settings.CACHES)
    caches["boards"] = {**caches["boards"], "LOCATION": "redis://127.0.0.1:1/0"}
    settings.CACHES = caches


@pytest.mark.django_db
def test_the_public_is_told_what_is_down_and_nothing_more(client, settings) -> None:
    _dead_redis(settings)
    response = client.get("/healthz", REMOTE_ADDR=PUBLIC)
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable", "down": ["redis"]}
    for leak in (b"Connection", b"127.0.0.1", b"6379", b"Error"):
        assert leak not in response.content


@pytest.mark.django_db
def test_the_public_sees_ok_with_no_details(client) -> None:
    response = client.get("/healthz", REMOTE_ADDR=PUBLIC)
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "down": []}


@pytest.mark.django_db
def test_staff_get_the_details_from_anywhere(client, settings, admin_user) -> None:
    _dead_redis(settings)
    client.force_login(admin_user)
    body = client.get("/healthz", REMOTE_ADDR=PUBLIC).json()
    assert body["down"] == ["redis"]
    assert "Connection" in body["dependencies"]["redis"]["error"]
    assert "boards" in body


@pytest.mark.django_db
def test_a_logged_in_user_who_is_not_staff_gets_the_short_form(client, django_user_model) -> None:
    user = django_user_model.objects.create_user(username="player", password="x-not-used")
    client.force_login(user)
    assert client.get("/healthz", REMOTE_ADDR=PUBLIC).json() == {"status": "ok", "down": []}


@pytest.mark.django_db
def test_the_internal_network_gets_the_details(client, settings) -> None:
    _dead_redis(settings)
    body = client.get("/healthz", REMOTE_ADDR="10.20.30.40").json()
    assert "Connection" in body["dependencies"]["redis"]["error"]


@pytest.mark.django_db
def test_the_publics_asks_share_one_round_of_checks(client, settings) -> None:
    settings.HEALTHZ_PUBLIC_CACHE_SECONDS = 60
    with CaptureQueriesContext(connection) as first:
        assert client.get("/healthz", REMOTE_ADDR=PUBLIC).status_code == 200
    assert any(q["sql"] == "SELECT 1" for q in first)
    # A flood of anonymous asks costs the dependencies nothing more within the period ...
    with CaptureQueriesContext(connection) as again:
        for _ in range(20):
            assert client.get("/healthz", REMOTE_ADDR=PUBLIC).json()["status"] == "ok"
    assert not any(q["sql"] == "SELECT 1" for q in again)
    # ... and an operator's ask checks afresh.
    with CaptureQueriesContext(connection) as operator:
        client.get("/healthz", REMOTE_ADDR="10.20.30.40")
    assert any(q["sql"] == "SELECT 1" for q in operator)
