"""The demo receiver: it accepts only genuine signed requests, keeps what it got, and shows it
to staff; end to end, events produced by hand reach it through the deliverer."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from django.test import Client

from tests.helpers import wait_until
from webhooks.selectors import demo_receipts_latest
from webhooks.services import webhook_endpoint_create
from webhooks.signing import signature_header

from .webhook_helpers import (
    SECRET,
    deliverer_options,
    publish_events,
    rank_event,
    running_deliverer,
)

PAGE = "/admin/webhooks/receiver"


def _post(client: Client, endpoint_id: int, events, *, secret=SECRET, ids=None, at=None):
    body = json.dumps(events).encode()
    headers = {
        "X-Leaderboard-Signature": signature_header(
            secret=secret, timestamp=int(at or time.time()), body=body
        ),
        "X-Leaderboard-Event-Ids": ",".join(ids or [e["eventId"] for e in events]),
        "X-Leaderboard-Delivery": "d-1",
    }
    return client.post(
        f"/webhooks/demo-receiver/{endpoint_id}",
        data=body,
        content_type="application/json",
        headers=headers,
    )


@pytest.fixture
def demo_on(settings):
    settings.WEBHOOK_DEMO_RECEIVER = True


@pytest.mark.django_db
@pytest.mark.usefixtures("demo_on")
def test_a_genuine_request_is_accepted_and_shown_a_forged_one_refused_and_shown(client, staff):
    endpoint, _ = webhook_endpoint_create(url="https://hooks.example.com/x", secret=SECRET)
    good = [rank_event(event_type="entered_top", player_id=7, rank=3)]
    assert _post(client, endpoint.id, good).status_code == 204
    cases: list[tuple[dict[str, Any], str]] = [
        ({"secret": "someone-else-0123456789"}, "does not match"),
        ({"at": time.time() - 3600}, "outside the tolerance"),
        ({"ids": ["not-the-body"]}, "does not list the body's events"),
    ]
    for kwargs, reason in cases:
        refused = _post(client, endpoint.id, [rank_event()], **kwargs)
        assert refused.status_code == 401
        assert reason in refused.json()["detail"]
    receipts = demo_receipts_latest()
    assert [r.verified for r in receipts] == [False, False, False, True]
    assert receipts[-1].events == good
    html = staff.get(PAGE).content.decode()
    assert "1 of 4 verified" in html
    assert good[0]["eventId"] in html
    assert "refused: signature does not match the body" in html
    assert "<code>entered_top</code>" in html


@pytest.mark.django_db
def test_unknown_endpoints_get_404_and_the_receiver_is_off_unless_enabled(client, settings):
    endpoint, _ = webhook_endpoint_create(url="https://hooks.example.com/x", secret=SECRET)
    settings.WEBHOOK_DEMO_RECEIVER = True
    assert _post(client, endpoint.id + 1, [rank_event()]).status_code == 404
    assert client.get(f"/webhooks/demo-receiver/{endpoint.id}").status_code == 405
    settings.WEBHOOK_DEMO_RECEIVER = False
    assert _post(client, endpoint.id, [rank_event()]).status_code == 404
    assert demo_receipts_latest() == []


@pytest.mark.django_db
def test_the_page_is_for_staff_only(client):
    response = client.get(PAGE)
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("demo_on")
def test_events_produced_by_hand_reach_the_demo_receiver_through_the_deliverer(
    live_server, staff, events_topics
):
    topic, dlq = events_topics
    endpoint, _ = webhook_endpoint_create(url=f"{live_server.url}/webhooks/demo-receiver/new")
    endpoint.url = f"{live_server.url}/webhooks/demo-receiver/{endpoint.id}"
    endpoint.save(update_fields=["url"])
    events = [
        rank_event(event_type="entered_top", player_id=11, rank=99),
        rank_event(event_type="left_top", player_id=12, rank=101, otherPlayerId=11),
        rank_event(event_type="overtaken", player_id=13, rank=5, otherPlayerId=14),
    ]
    publish_events(topic, events)
    ids = {e["eventId"] for e in events}
    with running_deliverer(deliverer_options(topic=topic, dead_letter_topic=dlq)):
        wait_until(
            lambda: ids <= {e["eventId"] for r in demo_receipts_latest() for e in r.events},
            timeout=30,
        )
    receipts = demo_receipts_latest()
    assert all(r.verified for r in receipts)
    html = staff.get(PAGE).content.decode()
    for event in events:
        assert event["eventId"] in html
    assert "refused" not in html.split('id="receiver-requests"')[1]
