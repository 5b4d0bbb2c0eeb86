"""SSRF: which addresses a webhook may reach, checked at registration and again after DNS at
every delivery, the connection made to the address checked, redirects never followed."""

from __future__ import annotations

import ipaddress
import socketserver
import threading
import time

import pytest
from django.core.exceptions import ValidationError

from tests.helpers import wait_until
from webhooks.models import WebhookDelivery
from webhooks.services import webhook_endpoint_create
from webhooks.targets import (
    TargetRefused,
    address_refusal,
    system_resolver,
    target_resolve,
    target_url_check,
)
from webhooks.transport import Answer, EndpointTransport

from .webhook_helpers import (
    SECRET,
    deliverer_options,
    publish_events,
    rank_event,
    running_deliverer,
)

REFUSED = [
    "127.0.0.1",
    "127.8.9.10",
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",  # the cloud metadata service
    "100.64.0.1",  # shared address space (carrier-grade NAT)
    "192.0.2.1",  # documentation
    "198.18.0.1",  # benchmarking
    "240.0.0.1",  # reserved
    "0.0.0.0",  # noqa: S104 -- an address judged, never bound
    "224.0.0.1",
    "::1",
    "fe80::1",
    "fc00::1",
    "::ffff:127.0.0.1",  # IPv4-mapped loopback
    "::ffff:10.0.0.1",
    "2002:7f00:1::1",  # 6to4 around 127.0.0.1
    "64:ff9b::a9fe:a9fe",  # NAT64 (RFC 6052) to 169.254.169.254
    "64:ff9b::7f00:1",  # NAT64 to 127.0.0.1
    "::ffff:0:a00:1",  # IPv4-translated 10.0.0.1
    "64:ff9b:1::808:808",  # NAT64's local-use prefix (RFC 8215)
    "2001:db8::1",
    "::",
]
PUBLIC = ["93.184.216.34", "8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "64:ff9b::808:808"]


@pytest.mark.parametrize("address", REFUSED)
def test_internal_addresses_are_refused(address):
    assert address_refusal(ipaddress.ip_address(address), allow_private=False) is not None


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_are_allowed(address):
    # Judged only: no test ever connects outside loopback.
    assert address_refusal(ipaddress.ip_address(address), allow_private=False) is None


def test_allowing_private_networks_still_refuses_multicast_and_unspecified():
    allowed = {
        a for a in REFUSED if address_refusal(ipaddress.ip_address(a), allow_private=True) is None
    }
    assert "127.0.0.1" in allowed
    assert "10.1.2.3" in allowed
    assert "169.254.169.254" in allowed
    for never in ("0.0.0.0", "224.0.0.1", "::"):  # noqa: S104 -- judged, never bound
        assert never not in allowed


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ftp://example.com/x", "http or https"),
        ("https://user:pw@example.com/x", "credentials"),
        ("http://127.0.0.1:8000/x", "loopback"),
        ("http://[::1]/x", "loopback"),
        ("http://10.0.0.7/x", "private"),
        ("http://localhost:8000/x", "loopback name"),
        ("http://api.localhost/x", "loopback name"),
        ("https:///nohost", "no host"),
        ("http://example.com:99999/x", "not a valid URL"),
    ],
)
def test_registration_refuses_urls_that_can_never_be_delivered_to(url, reason):
    with pytest.raises(TargetRefused, match=reason):
        target_url_check(url, allow_private=False)


def test_registration_takes_a_public_name():
    target_url_check("https://hooks.example.com/rank?x=1", allow_private=False)


@pytest.mark.django_db
def test_create_webhook_refuses_a_private_target_unless_allowed(settings):
    settings.WEBHOOK_ALLOW_PRIVATE = False
    with pytest.raises(ValidationError, match="loopback"):
        webhook_endpoint_create(url="http://127.0.0.1:9/x", secret=SECRET)
    settings.WEBHOOK_ALLOW_PRIVATE = True
    webhook_endpoint_create(url="http://127.0.0.1:9/x", secret=SECRET)


def test_a_name_is_judged_by_every_address_it_resolves_to():
    def resolver(host, port):
        return ["93.184.216.34", "127.0.0.1"]

    with pytest.raises(TargetRefused, match=r"resolves to 127\.0\.0\.1.*loopback"):
        target_resolve("https://mixed.example/x", allow_private=False, resolver=resolver)


def test_localhost_resolved_by_the_system_is_refused_after_dns():
    # The registration check is bypassed (as for a name whose DNS changes later): the
    # delivery-time check resolves it and refuses the loopback address it gets.
    with pytest.raises(TargetRefused, match=r"localhost resolves to .* loopback"):
        target_resolve("http://localhost:9/x", allow_private=False, resolver=system_resolver)


def _transport(*, allow_private, resolver=system_resolver, read_timeout=5.0):
    return EndpointTransport(
        connect_timeout=2.0,
        read_timeout=read_timeout,
        allow_private=allow_private,
        resolver=resolver,
    )


def test_no_request_reaches_a_loopback_receiver_when_private_targets_are_off(receiver_factory):
    receiver = receiver_factory()
    to_loopback_name = {"calls": 0}

    def rebinding(host, port):
        to_loopback_name["calls"] += 1
        return ["127.0.0.1"]

    for url, resolver in (
        (receiver.url, system_resolver),
        (f"http://localhost:{receiver.port}/hook", system_resolver),
        (f"http://rebind.example:{receiver.port}/hook", rebinding),
    ):
        answer = _transport(allow_private=False, resolver=resolver).post(
            url=url, body=b"[]", headers={}
        )
        assert not answer.ok
        assert answer.error.startswith("refused:"), answer.error
    assert to_loopback_name["calls"] == 1
    assert receiver.attempts == 0


def test_the_connection_goes_to_the_address_checked_with_the_name_as_host(receiver_factory):
    receiver = receiver_factory()
    answers = iter([["127.0.0.1"], ["127.0.0.2"]])
    calls = []

    def resolver(host, port):
        calls.append((host, port))
        return next(answers)

    answer = _transport(allow_private=True, resolver=resolver).post(
        url=f"http://receiver.example:{receiver.port}/hook?k=1", body=b"[]", headers={}
    )
    assert answer.ok, answer.error
    # Resolved once, and that answer used: a second lookup (127.0.0.2, where nothing listens)
    # would have failed.
    assert calls == [("receiver.example", receiver.port)]
    (request,) = receiver.answered()
    assert request.headers["Host"] == f"receiver.example:{receiver.port}"
    assert request.path == "/hook?k=1"


def test_an_internationalized_name_and_path_go_out_in_their_ascii_forms(receiver_factory):
    # Raw, neither fits a request line: http.client raised inside the worker, which died with
    # its batch and held every endpoint's offsets.
    receiver = receiver_factory()
    calls = []

    def resolver(host, port):
        calls.append(host)
        return ["127.0.0.1"]

    answer = _transport(allow_private=True, resolver=resolver).post(
        url=f"http://пример.рф:{receiver.port}/хук ok?k=1", body=b"[]", headers={}
    )
    assert answer.ok, answer.error
    assert calls == ["xn--e1afmkfd.xn--p1ai"]
    (request,) = receiver.answered()
    assert request.headers["Host"] == f"xn--e1afmkfd.xn--p1ai:{receiver.port}"
    assert request.path == "/%D1%85%D1%83%D0%BA%20ok?k=1"


def test_whatever_fails_in_a_request_is_a_failed_try_not_a_crash():
    def resolver(host, port):
        raise RuntimeError("a resolver bug")

    answer = _transport(allow_private=True, resolver=resolver).post(
        url="http://receiver.example/hook", body=b"[]", headers={}
    )
    assert (answer.ok, answer.status) == (False, 0)
    assert answer.error == "RuntimeError: a resolver bug"


def test_a_redirect_is_a_failure_and_never_followed(receiver_factory):
    elsewhere = receiver_factory()
    redirecting = receiver_factory(behaviour=lambda n: 307)
    redirecting.location = elsewhere.url
    answer = _transport(allow_private=True).post(url=redirecting.url, body=b"[]", headers={})
    assert not answer.ok
    assert answer.status == 307
    assert "not followed" in answer.error
    assert elsewhere.attempts == 0


def test_a_receiver_slower_than_the_timeout_is_a_failed_try(receiver_factory):
    slow = receiver_factory(delay=3.0)
    started = time.monotonic()
    answer = _transport(allow_private=True, read_timeout=0.5).post(
        url=slow.url, body=b"[]", headers={}
    )
    assert not answer.ok
    assert answer.status == 0
    assert "timed out" in answer.error.lower()
    assert time.monotonic() - started < 2.5


class _DripHandler(socketserver.StreamRequestHandler):
    """Answers 200 in the end, one byte of its headers every 0.1 s: each read of the client
    gets a byte well within any read timeout, the whole answer takes 30 s."""

    def handle(self) -> None:
        while self.rfile.readline() not in (b"\r\n", b""):
            pass  # the request's headers; its small body stays unread
        answer = b"HTTP/1.1 200 OK\r\nX-Drip: " + b"." * 300 + b"\r\nContent-Length: 0\r\n\r\n"
        try:
            for byte in answer:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(0.1)  # the receiver's own pace
        except OSError:
            pass  # the client gave up, as it should


def _served_post(
    handler: type[socketserver.StreamRequestHandler],
    *,
    host: str = "127.0.0.1",
    resolver=system_resolver,
) -> tuple[Answer, float]:
    """One try, 1 s deadline (0.5 s connect + 0.5 s read), against ``handler`` served on
    loopback: its answer and how long it took."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        transport = EndpointTransport(
            connect_timeout=0.5, read_timeout=0.5, allow_private=True, resolver=resolver
        )
        started = time.monotonic()
        answer = transport.post(
            url=f"http://{host}:{server.server_address[1]}/hook", body=b"[]", headers={}
        )
        return answer, time.monotonic() - started
    finally:
        server.shutdown()
        server.server_close()


def test_a_receiver_dripping_its_answer_fails_at_the_deadline():
    answer, elapsed = _served_post(_DripHandler)
    assert answer.status == 0
    assert "no complete answer within 1 s" in answer.error
    assert elapsed < 10  # the deadline (1 s), not the receiver's 30 s


def test_a_deadline_passed_before_the_request_went_out_sends_nothing():
    """The deadline's timer starts with the try; a slow DNS answer can outlast it before any
    socket exists to shut: the request is then not sent, rather than sent with no deadline."""

    def slow_dns(host: str, port: int) -> list[str]:
        time.sleep(1.5)  # the resolver's own slowness, past the 1 s deadline
        return ["127.0.0.1"]

    answer, elapsed = _served_post(_DripHandler, host="receiver.example", resolver=slow_dns)
    assert answer.status == 0
    assert "no complete answer within 1 s" in answer.error
    assert elapsed < 5  # not the receiver's 30 s


class _NulAnswerHandler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        while self.rfile.readline() not in (b"\r\n", b""):
            pass
        body = b"\x1f\x8b\x08\x00 a compressed error page"
        self.wfile.write(
            b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: %d\r\n\r\n" % len(body) + body
        )


def test_an_answer_holding_nul_bytes_is_kept_as_text_postgresql_can_store():
    answer, _ = _served_post(_NulAnswerHandler)
    assert answer.status == 500
    assert "\x00" not in answer.error
    assert "\\x00 a compressed error page" in answer.error


@pytest.mark.django_db(transaction=True)
def test_the_deliverer_checks_again_at_delivery_and_keeps_what_it_refused(
    settings, events_topics, receiver_factory
):
    topic, dlq = events_topics
    receiver = receiver_factory()
    endpoint, _ = webhook_endpoint_create(url=f"http://localhost:{receiver.port}/x", secret=SECRET)
    publish_events(topic, [rank_event()])
    options = deliverer_options(topic=topic, dead_letter_topic=dlq, allow_private=False)
    with running_deliverer(options):
        wait_until(lambda: WebhookDelivery.objects.filter(endpoint=endpoint).exists())
    row = WebhookDelivery.objects.get(endpoint=endpoint)
    assert row.last_error.startswith("refused: localhost resolves to")
    assert row.attempts == 1
    assert receiver.attempts == 0
