"""Pure parts of the deliverer: the offsets it may commit, the retry delays, the secrets'
encryption, reading rank events."""

from __future__ import annotations

import random

import orjson
import pytest
from cryptography.fernet import Fernet
from kafka.structs import TopicPartition

from webhooks.backoff import retry_delay
from webhooks.crypto import SecretUnreadable, secret_decrypt, secret_encrypt, secret_generate
from webhooks.events import EventRejected, batch_body, rank_event_decode
from webhooks.offsets import OffsetTracker
from webhooks.stats import DelivererStats, EndpointLive

P0 = TopicPartition("rank-events", 0)
P1 = TopicPartition("rank-events", 1)


def test_an_offset_is_committable_only_once_every_endpoint_released_it():
    tracker = OffsetTracker()
    a = tracker.read(P0, 10, holders=2)  # two endpoints want offset 10
    assert tracker.read(P0, 11, holders=0) == []  # nobody wants 11
    b = tracker.read(P0, 12, holders=1)
    assert tracker.committable() == {P0: 10}
    a[0].release()
    assert tracker.committable() == {P0: 10}  # the second endpoint still owes it
    b[0].release()  # 12 done before 10: the commit still waits for 10
    assert tracker.committable() == {P0: 10}
    a[1].release()
    assert tracker.committable() == {P0: 13}
    tracker.committed({P0: 13})
    assert tracker.committable() == {}  # nothing new


def test_partitions_are_tracked_apart_and_a_lost_one_is_forgotten():
    tracker = OffsetTracker()
    (p0,) = tracker.read(P0, 5, holders=1)
    (p1,) = tracker.read(P1, 7, holders=1)
    assert tracker.committable() == {P0: 5, P1: 7}
    tracker.retain({P1})  # P0 went to another process in a rebalance
    p0.release()  # its worker finishes later: no effect on a later assignment of P0
    assert tracker.committable() == {P1: 7}
    assert tracker.read(P0, 3, holders=1)  # P0 is back, read again from its committed offset
    assert tracker.committable() == {P0: 3, P1: 7}
    p1.release()
    assert tracker.held() == 1


def test_retry_delays_double_with_jitter_up_to_the_cap():
    rng = random.Random(7)
    for failures in range(1, 30):
        ceiling = min(3600.0, 5.0 * 2 ** (failures - 1))
        delays = [retry_delay(failures=failures, first=5, cap=3600, rng=rng) for _ in range(50)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1  # jittered
    assert retry_delay(failures=10_000, first=5, cap=60, rng=rng) <= 60


def test_a_secret_is_stored_encrypted_and_read_back_with_any_listed_key(settings):
    settings.WEBHOOK_SECRET_KEYS = []
    secret = secret_generate()
    assert secret.startswith("whsec_")
    assert len(secret) > 40
    stored = secret_encrypt(secret)
    assert secret not in stored
    assert secret_decrypt(stored) == secret
    # Rotation: a new first key encrypts, the old one still decrypts.
    new, old = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.WEBHOOK_SECRET_KEYS = [old]
    under_old = secret_encrypt(secret)
    settings.WEBHOOK_SECRET_KEYS = [new, old]
    assert secret_decrypt(under_old) == secret
    assert Fernet(new.encode()).decrypt(secret_encrypt(secret).encode()).decode() == secret
    # A key removed: unreadable, said plainly (never a wrong secret).
    settings.WEBHOOK_SECRET_KEYS = [new]
    with pytest.raises(SecretUnreadable, match="WEBHOOK_SECRET_KEYS"):
        secret_decrypt(under_old)


def test_an_event_is_read_with_the_fields_routing_needs_and_passed_on_untouched():
    raw = b'{"eventId":"e-1","type":"overtaken","seasonId":12,"board":"main","extra":[1, 2]}'
    event = rank_event_decode(raw)
    assert (event.event_id, event.type, event.board) == ("e-1", "overtaken", "12/main")
    assert event.raw == raw
    assert batch_body([raw, raw]) == b"[" + raw + b"," + raw + b"]"


@pytest.mark.parametrize(
    ("value", "code"),
    [
        (None, "invalid_json"),
        (b"{", "invalid_json"),
        (b"[]", "invalid_event"),
        (b'{"type":"x","seasonId":1,"board":"main"}', "invalid_event"),
        (b'{"eventId":"a b","type":"x","seasonId":1,"board":"main"}', "invalid_event"),
        (b'{"eventId":"a","type":"","seasonId":1,"board":"main"}', "invalid_event"),
        (b'{"eventId":"a","type":"x","seasonId":true,"board":"main"}', "invalid_event"),
        (b'{"eventId":"a","type":"x","seasonId":"1","board":"main"}', "invalid_event"),
        (b'{"eventId":"a","type":"x","seasonId":1}', "invalid_event"),
    ],
)
def test_an_event_it_cannot_route_is_rejected_with_its_code(value, code):
    with pytest.raises(EventRejected) as rejected:
        rank_event_decode(value)
    assert rejected.value.code == code


def test_a_deliverer_whose_commits_stay_refused_ends_itself_for_its_supervisor():
    from webhooks.deliverer import DelivererOptions, DelivererStalled, WebhookDeliverer

    options = DelivererOptions.from_settings(topic="t", rebalance_stall_seconds=120.0)
    deliverer = WebhookDeliverer(options)
    deliverer._watch_refusals(done=False, now=1000.0)
    deliverer._watch_refusals(done=False, now=1100.0)
    deliverer._watch_refusals(done=True, now=1110.0)  # a commit went through: start again
    deliverer._watch_refusals(done=False, now=1200.0)
    deliverer._watch_refusals(done=False, now=1320.0)
    with pytest.raises(DelivererStalled, match="refused for 121 s"):
        deliverer._watch_refusals(done=False, now=1321.0)


def test_deliverer_stats_of_another_version_are_read_field_by_field():
    """A rolling deploy runs two deliverer versions: a field one does not know is left out, a
    field it lacks takes its empty value, instead of a TypeError that took the /metrics
    collector and the staff dashboard down."""
    stats = DelivererStats(
        deliverer_id="d1",
        group_id="g",
        topic="rank-events",
        updated_at=1.5,
        kafka_lag=None,
        endpoints=(EndpointLive(7, 10, 2, 1, 0, 0, 3, 1.0, 2.0, None, "HTTP 500"),),
    )
    assert DelivererStats.from_json(stats.to_json()) == stats
    newer = orjson.loads(stats.to_json())
    newer["restarts"] = 3
    newer["endpoints"][0]["paused"] = True
    del newer["endpoints"][0]["last_error"]
    del newer["kafka_lag"]
    read = DelivererStats.from_json(orjson.dumps(newer))
    assert read.kafka_lag is None
    assert read.endpoints[0].last_error == ""
    assert read.endpoints[0].delivered_events == 10
    with pytest.raises(ValueError, match="not a JSON object"):
        DelivererStats.from_json(b"[1, 2]")
