"""Per-endpoint figures (delivered, failed, lag) on /metrics and on the staff dashboard, from a
deliverer really running: one endpoint healthy, one failing."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import wait_until
from tests.metrics.prom import ensure_prometheus, promtool
from webhooks.models import WebhookDelivery
from webhooks.services import webhook_endpoint_create

from .webhook_helpers import (
    SECRET,
    deliverer_options,
    publish_events,
    rank_event,
    running_deliverer,
    wait_for_events,
)

pytestmark = pytest.mark.django_db(transaction=True)


def _samples(client) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    response = client.get("/metrics")
    assert response.status_code == 200
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def test_delivered_failed_kept_and_lag_per_endpoint(client, staff, events_topics, receiver_factory):
    ensure_prometheus()
    topic, dlq = events_topics
    healthy = receiver_factory()
    failing = receiver_factory(behaviour=lambda n: 500)
    good, _ = webhook_endpoint_create(url=healthy.url, secret=SECRET, name="good")
    bad, _ = webhook_endpoint_create(url=failing.url, secret=SECRET, name="bad")
    events = [rank_event(player_id=p) for p in range(120)]
    publish_events(topic, events)

    def sample(name: str, **labels: str) -> float | None:
        return _samples(client).get((name, frozenset(labels.items())))

    options = deliverer_options(topic=topic, dead_letter_topic=dlq, retry_first=30, retry_max=60)
    with running_deliverer(options):
        wait_for_events(healthy, {e["eventId"] for e in events})
        wait_until(
            lambda: sum(r.event_count for r in WebhookDelivery.objects.filter(endpoint=bad)) == 120
        )
        wait_until(
            lambda: (
                sample("leaderboard_webhook_events_delivered_total", endpoint=str(good.id)) == 120
            ),
            timeout=15,
        )
        # On a loaded machine the failing endpoint's events may all have been kept as overflow
        # (it held the reading up) before its first try: that try comes from PostgreSQL, later.
        wait_until(
            lambda: (
                (sample("leaderboard_webhook_failed_attempts_total", endpoint=str(bad.id)) or 0)
                >= 1
            ),
            timeout=60,
        )
        samples = _samples(client)
        response = client.get("/metrics")
        dashboard = staff.get("/admin/dashboard").content.decode()

    def at(name: str, **labels: str) -> float:
        return samples[(name, frozenset(labels.items()))]

    good_id, bad_id = str(good.id), str(bad.id)
    assert at("leaderboard_webhook_events_delivered_total", endpoint=bad_id) == 0
    assert at("leaderboard_webhook_failed_attempts_total", endpoint=good_id) == 0
    assert at("leaderboard_webhook_failed_attempts_total", endpoint=bad_id) >= 1
    assert at("leaderboard_webhook_kept_events", endpoint=bad_id, status="retrying") == 120
    assert at("leaderboard_webhook_kept_events", endpoint=bad_id, status="failed") == 0
    assert at("leaderboard_webhook_lag_seconds", endpoint=good_id) == 0
    assert at("leaderboard_webhook_lag_seconds", endpoint=bad_id) > 0
    assert at("leaderboard_webhook_endpoint_active", endpoint=bad_id) == 1
    assert at("leaderboard_webhook_deliverers") == 1
    assert at("leaderboard_webhooks_collector_up") == 1
    checked = promtool("check", "metrics", stdin=response.content)
    assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()

    section = dashboard.split('id="webhooks-heading"')[1].split("</section>")[0]
    assert "1 deliverer(s) reporting" in section
    assert "good" in section
    assert '<td class="num">120</td>' in section  # delivered to good, retrying for bad
    assert "HTTP 500" in section
