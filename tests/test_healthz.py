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
