"""django-axes locks the admin login after AXES_FAILURE_LIMIT failures of one username from one
address (the suite runs with the default, 5)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

PASSWORD = "correct horse battery staple"


@pytest.fixture
def staff_user(db):
    return get_user_model().objects.create_user(
        "ops", password=PASSWORD, is_staff=True, is_superuser=True
    )


def _login(
    client: Client, password: str, address: str = "198.51.100.7", forwarded_for: str = ""
) -> int:
    response = client.post(
        "/admin/login/?next=/admin/",
        {"username": "ops", "password": password},
        headers={"X-Forwarded-For": forwarded_for} if forwarded_for else None,
        REMOTE_ADDR=address,
    )
    return response.status_code


def test_the_sixth_wrong_password_and_then_the_right_one_are_refused(staff_user, settings) -> None:
    assert settings.AXES_FAILURE_LIMIT == 5
    client = Client()
    for _ in range(4):
        assert _login(client, "wrong") == 200  # the form again, with its error
    assert _login(client, "wrong") == 429  # the 5th failure reaches the limit
    assert _login(client, "wrong") == 429
    assert _login(client, PASSWORD) == 429
    assert "_auth_user_id" not in client.session
    assert client.get("/admin/").status_code == 302  # still not logged in


def test_the_lockout_is_per_username_and_address(staff_user) -> None:
    for _ in range(6):
        _login(Client(), "wrong")
    other = Client()
    # The same staff member from another address is not locked out by someone guessing.
    assert _login(other, PASSWORD, address="203.0.113.9") == 302
    assert other.get("/admin/").status_code == 200


def test_a_success_before_the_limit_resets_the_count(staff_user) -> None:
    client = Client()
    for _ in range(4):
        assert _login(client, "wrong") == 200
    assert _login(client, PASSWORD) == 302
    client.logout()
    for _ in range(4):
        assert _login(client, "wrong") == 200
    assert _login(client, PASSWORD) == 302


def test_a_forged_forwarded_for_does_not_escape_the_lockout(staff_user) -> None:
    client = Client()
    for n in range(6):
        client.post(
            "/admin/login/",
            {"username": "ops", "password": "wrong"},
            REMOTE_ADDR="198.51.100.7",
            HTTP_X_FORWARDED_FOR=f"10.0.0.{n}",
        )
    assert _login(client, PASSWORD) == 429


def test_behind_a_trusted_proxy_the_lockout_is_per_client_not_per_proxy(
    staff_user, settings
) -> None:
    # Every request comes from the proxy (10.0.0.5); the client is the entry it appended.
    settings.API_TRUSTED_PROXY_COUNT = 1
    proxy = "10.0.0.5"
    for _ in range(6):
        _login(Client(), "wrong", proxy, forwarded_for="203.0.113.66")
    assert _login(Client(), "wrong", proxy, forwarded_for="203.0.113.66") == 429
    # The staff member, through the same proxy from elsewhere, still gets in.
    assert _login(Client(), PASSWORD, proxy, forwarded_for="198.51.100.7") == 302
    # A client cannot pick its address: what it writes left of the proxy's entry is ignored.
    forged = "192.0.2.1, 203.0.113.66"
    assert _login(Client(), PASSWORD, proxy, forwarded_for=forged) == 429
