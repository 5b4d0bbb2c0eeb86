"""What Django refuses before a view answers (DATA_UPLOAD_MAX_NUMBER_FIELDS) is a 400 in the
API's error shape under /api/, and Django's plain 400 page elsewhere."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client

pytestmark = pytest.mark.django_db

TOO_MANY = "&".join(["a"] * (settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1))


def test_too_many_query_fields_is_a_json_400_under_the_api() -> None:
    response = Client(raise_request_exception=False).get(f"/api/seasons?{TOO_MANY}")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json()["detail"].startswith("bad request: The number of GET/POST parameters")


def test_too_many_query_fields_is_the_plain_400_page_elsewhere() -> None:
    response = Client(raise_request_exception=False).get(f"/?{TOO_MANY}")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
