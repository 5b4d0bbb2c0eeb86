"""Helpers of the webhook tests: rank events made by hand, a real local HTTP receiver, an
independent signature check, and the deliverer run in a thread."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from django.conf import settings

from tests.helpers import subprocess_database_url, wait_until
from tests.ingestion.ingest_helpers import MANAGE, committed_offsets, end_offsets, publish
from webhooks.backoff import Clock, system_clock
from webhooks.deliverer import (
    DelivererOptions,
    DelivererStalled,
    DelivererTotals,
    WebhookDeliverer,
)
from webhooks.management.commands.deliver_webhooks import STALLED_EXIT_STATUS
from webhooks.targets import Resolver, system_resolver

SECRET = "test-secret-0123456789abcdef"


def rank_event(
    *,
    event_type: str = "rank_changed",
    season_id: int = 1,
    board: str = "main",
    player_id: int = 42,
    rank: int = 7,
    **extra: Any,
) -> dict[str, Any]:
    """An event with every field of the contract, as the write path publishes it."""
    return {
        "eventId": extra.pop("event_id", uuid.uuid4().hex),
        "type": event_type,
        "seasonId": season_id,
        "board": board,
        "playerId": player_id,
        "rank": rank,
        "previousRank": rank + 3,
        "points": 1500,
        "previousPoints": 1400,
        "matchId": str(uuid.uuid4()),
        "otherPlayerId": None,
        "at": "2026-10-12T10:15:00Z",
        **extra,
    }


def publish_events(topic: str, events: Iterable[dict[str, Any]]) -> int:
    return publish(
        topic,
        ((str(e["playerId"]).encode(), json.dumps(e).encode()) for e in events),
    )


def hmac_sha256_by_hand(key: bytes, message: bytes) -> str:
    """RFC 2104 HMAC-SHA256 written out from hashlib alone: the product's signature is checked
    against this, not against the ``hmac`` module the product itself uses."""
    block = 64
    if len(key) > block:
        key = hashlib.sha256(key).digest()
    key = key.ljust(block, b"\0")
    inner = hashlib.sha256(bytes(k ^ 0x36 for k in key) + message).digest()
    return hashlib.sha256(bytes(k ^ 0x5C for k in key) + inner).hexdigest()


def verify_independently(*, secret: str, header: str, body: bytes) -> int:
    """The signed time, after checking ``t=<t>,v1=<hex>`` against "<t>.<body>"."""
    fields = dict(part.split("=", 1) for part in header.split(","))
    assert set(fields) == {"t", "v1"}, header
    expected = hmac_sha256_by_hand(secret.encode(), fields["t"].encode() + b"." + body)
    assert fields["v1"] == expected, "signature does not match"
    return int(fields["t"])


@dataclass
class Received:
    at: float
    path: str
    headers: dict[str, str]
    body: bytes
    status: int  # what the receiver answered

    @property
    def events(self) -> list[dict[str, Any]]:
        parsed: list[dict[str, Any]] = json.loads(self.body)
        return parsed

    @property
    def event_ids(self) -> list[str]:
        return [e["eventId"] for e in self.events]


# request number (1-based) -> status to answer (and an optional delay or hold before it).
Behaviour = Callable[[int], int]


@dataclass
class Receiver:
    """A real HTTP server on loopback that records every POST and answers what ``behaviour``
    says; ``hold`` (an Event) makes every request wait until it is set (a slow endpoint)."""

    behaviour: Behaviour = lambda n: 204
    delay: float = 0.0
    hold: threading.Event | None = None
    requests: list[Received] = field(default_factory=list)
    attempts: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with receiver._lock:
                    receiver.attempts += 1
                    number = receiver.attempts
                if receiver.hold is not None:
                    receiver.hold.wait(60)
                if receiver.delay:
                    time.sleep(receiver.delay)  # the endpoint's own slowness, not a sync
                status = receiver.behaviour(number)
                with receiver._lock:
                    receiver.requests.append(
                        Received(time.monotonic(), self.path, dict(self.headers), body, status)
                    )
                try:
                    self.send_response(status)
                    if 300 <= status < 400:
                        self.send_header("Location", receiver.location)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the deliverer gave up first (a timeout under test), as it may

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.location = ""
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def answered(self) -> list[Received]:
        """Every request answered so far, in order."""
        with self._lock:
            return list(self.requests)

    def event_ids(self) -> list[str]:
        """The ids of the events it accepted (answered 2xx), with repeats."""
        return [i for r in self.answered() if 200 <= r.status < 300 for i in r.event_ids]

    def close(self) -> None:
        if self.hold is not None:
            self.hold.set()
        self.server.shutdown()
        self.server.server_close()


def deliverer_options(*, topic: str, dead_letter_topic: str, **overrides: Any) -> DelivererOptions:
    group = f"test-webhooks-{uuid.uuid4().hex[:12]}"
    fields: dict[str, Any] = {
        "group_id": group,
        # Static membership, as production runs it (WEBHOOK_GROUP_INSTANCE_ID): on a loaded
        # machine a dynamic member's slow first joins left pending members behind, and the
        # group waited out their sessions before it could commit.
        "group_instance_id": f"{group}-0",
        "poll_timeout_ms": 100,
        "stats_interval_seconds": 1.0,
        "refresh_seconds": 0.3,
        "retry_first": 0.2,
        "retry_max": 2.0,
        "connect_timeout": 2.0,
        "read_timeout": 5.0,
        "backoff_max_seconds": 1.0,
        "commit_interval_seconds": 0.2,
        "rebalance_stall_seconds": 15.0,
    }
    fields.update(overrides)
    return DelivererOptions.from_settings(
        topic=topic, dead_letter_topic=dead_letter_topic, **fields
    )


class Running:
    """The deliverer a test runs, and what it did (the last one started, after a restart)."""

    def __init__(self) -> None:
        self.current: WebhookDeliverer | None = None
        self.restarts = 0

    @property
    def totals(self) -> DelivererTotals:
        assert self.current is not None
        return self.current.totals


@contextlib.contextmanager
def running_deliverer(
    options: DelivererOptions,
    *,
    clock: Clock = system_clock,
    resolver: Resolver = system_resolver,
) -> Iterator[Running]:
    """The deliverer in a thread for the duration of the block; stopped and joined after it
    (a failure inside the thread fails the test). A deliverer that ends itself as stalled is
    started again, as its supervisor would (same group and static member id)."""
    running = Running()
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        while not stop.is_set():
            running.current = WebhookDeliverer(options, stop=stop, clock=clock, resolver=resolver)
            try:
                running.current.run()
            except DelivererStalled:
                running.restarts += 1
                continue
            except BaseException as exc:
                errors.append(exc)
                raise
            return

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield running
    finally:
        stop.set()
        thread.join(30)
        assert not thread.is_alive(), "the deliverer did not stop within 30 s"
    assert not errors, errors


class FakeClock:
    """A clock the test moves by hand (unix seconds)."""

    def __init__(self, start: float | None = None) -> None:
        self.now = time.time() if start is None else start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds


def assert_received(receiver: Receiver, expected: Iterable[str], running: Running) -> None:
    """``receiver`` accepted exactly the ``expected`` event ids, each once; or, after a
    restart of the deliverer (one that ended as stalled before it could commit), each at least
    once: what was not committed is read and sent again, as at-least-once promises."""
    got = receiver.event_ids()
    wanted = sorted(expected)
    assert set(got) == set(wanted)
    if not running.restarts:
        assert sorted(got) == wanted


def wait_for_events(receiver: Receiver, expected: set[str], *, timeout: float = 30) -> None:
    wait_until(
        lambda: expected <= set(receiver.event_ids()),
        timeout=timeout,
        context=lambda: f"received {len(set(receiver.event_ids()))} of {len(expected)} events",
    )


def all_committed(topic: str, group_id: str) -> bool:
    """Whether the group has committed every partition of ``topic`` to its end (a partition
    that never had a record needs no commit)."""
    ends = end_offsets(topic)
    committed = committed_offsets(topic, group_id)
    return all(end == 0 or committed.get(p) == end for p, end in ends.items())


def wait_committed(
    topic: str,
    group_id: str,
    *,
    context: Callable[[], str] | None = None,
    process: DelivererProcess | None = None,
) -> None:
    """Wait until ``all_committed``. A commit is refused while the group rebalances, and a
    fresh group's first rebalances on a loaded machine were seen to take over 30 s (the
    session timeout is 45 s): the wait allows 60. A ``process`` that ends as stalled meanwhile
    is started again (``DelivererProcess.supervised``)."""
    condition = lambda: all_committed(topic, group_id)  # noqa: E731
    if process is not None:
        condition = process.supervised(condition)
    wait_until(condition, timeout=60, every=0.1, context=context)


class DelivererProcess:
    """``manage.py deliver_webhooks`` against this test's database, key prefix, topic and group,
    with the retry and refresh periods shortened."""

    def __init__(self, *, topic: str, dlq: str, group: str, log: Path) -> None:
        self.args = [
            sys.executable,
            str(MANAGE),
            "deliver_webhooks",
            "--topic",
            topic,
            "--dead-letter-topic",
            dlq,
            "--group",
            group,
            # Static membership: a restart takes the killed process's partitions at once.
            "--instance-id",
            f"{group}-0",
            "--stats-interval",
            "1",
        ]
        self.env = {
            **os.environ,
            "DATABASE_URL": subprocess_database_url(),
            "LEADERBOARD_KEY_PREFIX": settings.LEADERBOARD_KEY_PREFIX,
            "WEBHOOK_RETRY_FIRST_SECONDS": "0.2",
            "WEBHOOK_RETRY_MAX_SECONDS": "1",
            "WEBHOOK_REFRESH_SECONDS": "0.3",
            "INGEST_BACKOFF_MAX_SECONDS": "1",
            # A member kept out of its group (seen for over 60 s on the three brokers) ends the
            # process sooner, for ``supervised`` to restart it.
            "WEBHOOK_REBALANCE_STALL_SECONDS": "15",
        }
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.args, env=self.env, stdout=out, stderr=out)

    def supervised(self, condition: Callable[[], bool]) -> Callable[[], bool]:
        """``condition`` for ``wait_until``, starting the process again first when it ended as
        stalled (exit status 70), as its supervisor would; same group and static member id."""

        def check() -> bool:
            assert self.proc is not None
            if self.proc.poll() == STALLED_EXIT_STATUS:
                self.restarts += 1
                self.start()
            return condition()

        return check

    def log_tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        kept = [line for line in text.splitlines() if " kafka" not in line]
        return "deliverer log (tail):\n" + "\n".join(kept[-lines:])

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(timeout=30)

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)

    def kill_if_running(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
