"""Staff in the admin: endpoints (secret shown once, stored encrypted), kept batches (see,
resend, purge), and a resent batch really delivered by the deliverer."""

from __future__ import annotations

import re
import time
import uuid
from datetime import timedelta

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.urls import reverse
from django.utils import timezone

from tests.helpers import wait_until
from webhooks.crypto import secret_decrypt
from webhooks.models import DeliveryStatus, WebhookDelivery, WebhookEndpoint
from webhooks.services import webhook_endpoint_create

from .webhook_helpers import SECRET, deliverer_options, running_deliverer, wait_for_events

SHOWN_SECRET = re.compile(r"whsec_[A-Za-z0-9_\-]{40,}")


def _kept(endpoint: WebhookEndpoint, *, status: str = DeliveryStatus.FAILED, ids=("e1", "e2")):
    now = timezone.now()
    body = "[" + ",".join(f'{{"eventId":"{i}","type":"entered_top"}}' for i in ids) + "]"
    return WebhookDelivery.objects.create(
        endpoint=endpoint,
        body=body,
        event_ids=list(ids),
        event_count=len(ids),
        status=status,
        attempts=31,
        received_at=now - timedelta(hours=25),
        created_at=now - timedelta(hours=25),
        next_attempt_at=now - timedelta(hours=1),
        give_up_at=now - timedelta(hours=1),
        last_error="HTTP 500: boom",
        last_status=500,
    )


@pytest.mark.django_db
def test_adding_an_endpoint_shows_its_generated_secret_once(admin_client):
    response = admin_client.post(
        reverse("admin:webhooks_webhookendpoint_add"),
        {
            "name": "backend",
            "url": "https://hooks.example.com/rank",
            "event_types": ["entered_top", "overtaken"],
            "boards": "",
            "is_active": "on",
            "secret": "",
        },
        follow=True,
    )
    assert response.status_code == 200
    shown = set(SHOWN_SECRET.findall(response.content.decode()))
    assert len(shown) == 1
    secret = shown.pop()
    endpoint = WebhookEndpoint.objects.get()
    assert endpoint.event_types == ["entered_top", "overtaken"]
    assert secret not in endpoint.secret_encrypted
    assert secret_decrypt(endpoint.secret_encrypted) == secret
    for page in (
        "admin:webhooks_webhookendpoint_changelist",
        "admin:webhooks_webhookendpoint_change",
    ):
        args = [endpoint.id] if page.endswith("change") else []
        html = admin_client.get(reverse(page, args=args)).content.decode()
        assert secret not in html
        assert endpoint.secret_encrypted not in html


@pytest.mark.django_db
def test_a_typed_secret_is_never_echoed_and_a_new_one_replaces_it(admin_client):
    typed = "typed-by-staff-0123456789"
    response = admin_client.post(
        reverse("admin:webhooks_webhookendpoint_add"),
        {"url": "https://hooks.example.com/a", "boards": "", "is_active": "on", "secret": typed},
        follow=True,
    )
    assert typed not in response.content.decode()
    endpoint = WebhookEndpoint.objects.get()
    assert secret_decrypt(endpoint.secret_encrypted) == typed
    # The change form keeps the secret when left empty, replaces it when given.
    change = reverse("admin:webhooks_webhookendpoint_change", args=[endpoint.id])
    form = {"url": endpoint.url, "boards": "", "is_active": "on", "name": "renamed", "secret": ""}
    admin_client.post(change, form, follow=True)
    endpoint.refresh_from_db()
    assert (endpoint.name, secret_decrypt(endpoint.secret_encrypted)) == ("renamed", typed)
    admin_client.post(change, {**form, "secret": "another-secret-0123456"}, follow=True)
    endpoint.refresh_from_db()
    assert secret_decrypt(endpoint.secret_encrypted) == "another-secret-0123456"
    # The action generates one and shows it once.
    response = admin_client.post(
        reverse("admin:webhooks_webhookendpoint_changelist"),
        {"action": "new_secret", ACTION_CHECKBOX_NAME: [endpoint.id]},
        follow=True,
    )
    (generated,) = set(SHOWN_SECRET.findall(response.content.decode()))
    endpoint.refresh_from_db()
    assert secret_decrypt(endpoint.secret_encrypted) == generated


@pytest.mark.django_db
def test_the_form_refuses_bad_filters_and_private_targets(admin_client, settings):
    settings.WEBHOOK_ALLOW_PRIVATE = False
    response = admin_client.post(
        reverse("admin:webhooks_webhookendpoint_add"),
        {"url": "http://10.0.0.5/hook", "boards": "77/main", "secret": "short"},
    )
    html = response.content.decode()
    assert "10.0.0.5 is a private address" in html
    assert "season 77 has no board" in html
    assert "at least 16 characters" in html
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.django_db
def test_kept_batches_are_listed_searchable_by_event_id_resent_and_purged(admin_client):
    endpoint, _ = webhook_endpoint_create(url="https://hooks.example.com/x", secret=SECRET)
    resend = _kept(endpoint, ids=("alpha-1", "alpha-2"))
    purge = _kept(endpoint, ids=("beta-1",))
    changelist = reverse("admin:webhooks_webhookdelivery_changelist")
    html = admin_client.get(changelist).content.decode()
    assert "HTTP 500: boom" in html
    assert "gave up" in html
    found = admin_client.get(changelist, {"q": "beta-1"}).content.decode()
    assert str(purge.id) in found
    assert str(resend.id) not in found
    detail = admin_client.get(
        reverse("admin:webhooks_webhookdelivery_change", args=[resend.id])
    ).content.decode()
    assert "alpha-2" in detail

    before = time.time()
    admin_client.post(
        changelist, {"action": "resend", ACTION_CHECKBOX_NAME: [resend.id]}, follow=True
    )
    resend.refresh_from_db()
    assert resend.status == DeliveryStatus.PENDING
    assert before - 1 <= resend.next_attempt_at.timestamp() <= time.time() + 1
    assert resend.give_up_at.timestamp() == pytest.approx(before + 24 * 3600, abs=60)

    response = admin_client.post(
        changelist, {"action": "purge", ACTION_CHECKBOX_NAME: [purge.id]}, follow=True
    )
    assert "1 batch(es) purged" in response.content.decode()
    assert list(WebhookDelivery.objects.values_list("id", flat=True)) == [resend.id]


@pytest.mark.django_db(transaction=True)
def test_a_batch_resent_from_the_admin_is_delivered(admin_client, events_topics, receiver_factory):
    topic, dlq = events_topics
    receiver = receiver_factory()
    endpoint, _ = webhook_endpoint_create(url=receiver.url, secret=SECRET)
    failed = _kept(endpoint, ids=(uuid.uuid4().hex, uuid.uuid4().hex))
    with running_deliverer(deliverer_options(topic=topic, dead_letter_topic=dlq)):
        admin_client.post(
            reverse("admin:webhooks_webhookdelivery_changelist"),
            {"action": "resend", ACTION_CHECKBOX_NAME: [failed.id]},
        )
        wait_for_events(receiver, set(failed.event_ids))
        wait_until(lambda: not WebhookDelivery.objects.exists())
    (request,) = receiver.answered()
    assert request.body == failed.body.encode()
    assert request.headers["X-Leaderboard-Delivery"] == str(failed.id)
