"""With DEBUG off an unhandled exception answers a bare 500: JSON under /api/, never a debug
page, never a setting."""

from __future__ import annotations

import pytest
from django.test import Client


@pytest.fixture
def client(settings) -> Client:
    settings.ROOT_URLCONF = "tests.leaderboard_project.server_error_urls"
    settings.DEBUG = False
    # The exception goes to handler500 as in production instead of up into the test.
    return Client(raise_request_exception=False)


@pytest.mark.parametrize("path", ["/api/boom", "/api/drf-boom"])
def test_an_api_500_is_json_and_says_nothing_more(client, path) -> None:
    response = client.get(path)
    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "Internal server error"}


def test_a_page_500_is_the_plain_page(client) -> None:
    response = client.get("/pages/boom")
    assert response.status_code == 500
    assert response["Content-Type"].startswith("text/html")
    body = response.content.decode()
    assert "Server Error (500)" in body
    for leak in ("kaboom", "s3cret", "DATABASE_URL", "Traceback", "SECRET_KEY"):
        assert leak not in body
