from __future__ import annotations

import pytest


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
