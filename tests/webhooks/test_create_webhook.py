"""``manage.py create_webhook``: registers an endpoint, its secret stored encrypted and shown
once (only when generated), and refuses bad input with a message."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from leaderboard.services import board_create
from tests.helpers import make_season
from webhooks.crypto import secret_decrypt
from webhooks.models import WebhookEndpoint

pytestmark = pytest.mark.django_db


def _create(*args: str) -> list[str]:
    out = StringIO()
    call_command("create_webhook", *args, stdout=out)
    return out.getvalue().splitlines()


def test_an_endpoint_with_its_filters_and_the_secret_given():
    make_season(id=12)
    board_create(season_id=12, slug="lap-times", name="Laps")
    secret = "s3cret-given-by-ops-0123"
    lines = _create(
        "--url",
        "https://hooks.example.com/rank",
        "--secret",
        secret,
        "--types",
        "personal_best,entered_top",
        "--board",
        "12/lap-times",
        "--board",
        "12/main",
        "--name",
        "Game backend",
    )
    endpoint = WebhookEndpoint.objects.get()
    assert endpoint.url == "https://hooks.example.com/rank"
    assert endpoint.event_types == ["entered_top", "personal_best"]
    assert endpoint.boards == ["12/lap-times", "12/main"]
    assert endpoint.is_active
    assert endpoint.name == "Game backend"
    assert secret not in endpoint.secret_encrypted
    assert secret_decrypt(endpoint.secret_encrypted) == secret
    assert lines == [
        f"created webhook endpoint {endpoint.id} -> https://hooks.example.com/rank "
        "(entered_top, personal_best; 12/lap-times, 12/main)"
    ]


def test_without_a_secret_one_is_generated_and_printed_once_on_the_last_line():
    lines = _create("--url", "https://hooks.example.com/x", "--inactive")
    endpoint = WebhookEndpoint.objects.get()
    assert not endpoint.is_active
    assert lines[-1].startswith("whsec_")
    assert secret_decrypt(endpoint.secret_encrypted) == lines[-1]
    assert "every type; every board; inactive" in lines[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--types", "entered_top,promoted"], "unknown event type(s) promoted"),
        (["--board", "99/main"], "season 99 has no board 'main'"),
        (["--board", "main"], "use <season id>/<board slug>"),
        (["--secret", "short"], "at least 16 characters"),
    ],
)
def test_bad_input_is_refused_with_a_message(args, message):
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _create("--url", "https://hooks.example.com/x", *args)
    assert not WebhookEndpoint.objects.exists()


def test_a_loopback_url_is_refused_unless_private_targets_are_allowed(settings):
    settings.WEBHOOK_ALLOW_PRIVATE = False
    with pytest.raises(CommandError, match="loopback"):
        _create("--url", "http://127.0.0.1:8000/hook")
    with pytest.raises(CommandError, match="loopback name"):
        _create("--url", "http://localhost:8000/hook")
