"""Webhook deliverer benchmark: rank events per second from Kafka to a local receiver.

Run on demand (never in the test suite)::

    bench/webhooks                              # 100,000 events, 1 and 4 endpoints
    bench/webhooks --events 300000 --endpoints 1,4,16

In one run against the local Kafka and PostgreSQL:

1. a receiver in a process of its own (a threaded ``http.server`` on loopback, HTTP/1.1
   keep-alive) that answers 204 and counts the events of each request from its
   ``X-Leaderboard-Event-Ids`` header;
2. the baseline: one thread POSTing the same batches (100 events, bodies built in advance) to
   the receiver over one kept-alive connection with urllib3, nothing else: what the receiver and
   loopback HTTP take from one client;
3. ``--events`` rank events published to a topic of the run's own (4 partitions);
4. for each ``--endpoints`` count E: ``manage.py deliver_webhooks`` as a process (a group of
   its own) with E endpoints registered (each gets every event: E x events deliveries), timed
   from its first delivered event to its last: events delivered per second, and that rate
   against the baseline.

Isolation: its own database (``leaderboard_bench_webhooks``, migrated, emptied at the start),
its own topic, group and Redis key prefix. The figures depend on the machine's load: the
report records the load average at the start.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RUN_TAG = uuid.uuid4().hex[:8]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaderboard_project.local_clusters")
os.environ["LEADERBOARD_KEY_PREFIX"] = f"bench-{RUN_TAG}"
os.environ.setdefault("LOG_LEVEL", "WARNING")
os.environ["WEBHOOK_ALLOW_PRIVATE"] = "true"

from bench.database import bench_database_url, bench_secret_key_default  # noqa: E402

bench_secret_key_default(bench="webhooks")
os.environ["DATABASE_URL"] = bench_database_url(
    name=os.environ.get("BENCH_WEBHOOKS_DATABASE_NAME", "leaderboard_bench_webhooks")
)

import django  # noqa: E402

django.setup()

import urllib3  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from kafka import KafkaAdminClient, KafkaProducer  # noqa: E402
from kafka.admin import NewTopic  # noqa: E402
from tqdm import tqdm  # noqa: E402

from webhooks.models import WebhookDelivery, WebhookEndpoint  # noqa: E402
from webhooks.services import webhook_endpoint_create  # noqa: E402

RESULTS_DIR = ROOT / "bench" / "results"
BATCH = 100

# The receiver, run as `python -c RECEIVER <port>`: counts events, answers 204; GET = the count.
RECEIVER = r"""
import sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
count = 0
requests = 0
lock = threading.Lock()
class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        global count, requests
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        ids = self.headers.get("X-Leaderboard-Event-Ids", "")
        with lock:
            count += ids.count(",") + 1 if ids else 0
            requests += 1
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def do_GET(self):
        body = f"{count} {requests}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
server.daemon_threads = True
print("ready", flush=True)
server.serve_forever()
"""


@dataclass
class Report:
    started_at: str
    args: dict[str, object]
    load_average_at_start: str = ""
    baseline_events_per_s: float = 0.0
    runs: list[dict[str, float]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Receiver:
    def __init__(self) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", RECEIVER, str(self.port)], stdout=subprocess.PIPE
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == b"ready"
        self._http = urllib3.PoolManager(maxsize=1)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path}"

    def counts(self) -> tuple[int, int]:
        """(events, requests) received so far."""
        events, requests = self._http.request("GET", self.url("count")).data.split()
        return int(events), int(requests)

    def count(self) -> int:
        return self.counts()[0]

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def event_bodies(count: int) -> list[bytes]:
    """Rank events of the contract's shape, as the write path would publish them."""
    return [
        json.dumps(
            {
                "eventId": f"{RUN_TAG}-{n}",
                "type": ("rank_changed", "personal_best", "entered_top", "overtaken")[n % 4],
                "seasonId": 1,
                "board": "main",
                "playerId": 1_000_000 + n,
                "rank": 1 + n % 5000,
                "previousRank": 2 + n % 5000,
                "points": 1000 + n % 997,
                "previousPoints": 990 + n % 997,
                "matchId": str(uuid.uuid4()),
                "otherPlayerId": 2_000_000 + n if n % 4 == 3 else None,
                "at": "2026-10-12T10:15:00Z",
            },
            separators=(",", ":"),
        ).encode()
        for n in range(count)
    ]


def baseline(receiver: Receiver, bodies: list[bytes]) -> float:
    """Events/s of one thread POSTing 100-event batches, nothing else."""
    pool = urllib3.HTTPConnectionPool("127.0.0.1", receiver.port, maxsize=1, retries=False)
    batches = [
        (b"[" + b",".join(bodies[i : i + BATCH]) + b"]", min(BATCH, len(bodies) - i))
        for i in range(0, len(bodies), BATCH)
    ]
    started = time.monotonic()
    for body, size in tqdm(batches, desc="baseline: POST loop", unit="batch"):
        headers = {"X-Leaderboard-Event-Ids": ",".join(str(n) for n in range(size))}
        response = pool.urlopen("POST", "/baseline", body=body, headers=headers)
        assert response.status == 204
    return len(bodies) / (time.monotonic() - started)


def publish(topic: str, bodies: list[bytes]) -> None:
    admin = KafkaAdminClient(bootstrap_servers=settings.KAFKA_BOOTSTRAP_SERVERS)
    admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=1)])
    admin.close()
    producer = KafkaProducer(
        bootstrap_servers=settings.KAFKA_BOOTSTRAP_SERVERS, acks="all", linger_ms=20
    )
    for n, body in enumerate(tqdm(bodies, desc=f"publish to {topic}", unit="event")):
        producer.send(topic, key=str(n).encode(), value=body)
    producer.flush()
    producer.close()


def deliver(*, receiver: Receiver, topic: str, endpoints: int, events: int) -> dict[str, float]:
    """Run the deliverer process with ``endpoints`` endpoints until the receiver counted every
    delivery; the rate from the first delivered event to the last."""
    WebhookDelivery.objects.all().delete()
    WebhookEndpoint.objects.all().delete()
    for n in range(endpoints):
        webhook_endpoint_create(url=receiver.url(f"e{n}"), name=f"bench-{n}")
    expected = receiver.count() + endpoints * events
    env = {**os.environ, "WEBHOOK_REFRESH_SECONDS": "1", "WEBHOOK_STATS_INTERVAL_SECONDS": "5"}
    group = f"bench-webhooks-{RUN_TAG}-{endpoints}"
    log = RESULTS_DIR / f"webhooks-{RUN_TAG}-{endpoints}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "manage.py"),
                "deliver_webhooks",
                "--topic",
                topic,
                "--group",
                group,
                "--dead-letter-topic",
                f"{topic}.dlq",
            ],
            env=env,
            stdout=out,
            stderr=out,
        )
    try:
        start_count, start_requests = receiver.counts()
        first_at = None
        with tqdm(total=endpoints * events, desc=f"deliver to {endpoints} endpoint(s)") as bar:
            seen = start_count
            while seen < expected:
                if proc.poll() is not None:
                    raise SystemExit(f"deliver_webhooks exited {proc.returncode}; see {log}")
                time.sleep(0.05)  # polling the receiver's count
                now_count = receiver.count()
                if first_at is None and now_count > start_count:
                    first_at = time.monotonic()
                bar.update(now_count - seen)
                seen = now_count
        finished = time.monotonic()
    finally:
        proc.terminate()
        proc.wait(30)
    assert first_at is not None
    seconds = finished - first_at
    requests = receiver.counts()[1] - start_requests
    return {
        "endpoints": endpoints,
        "deliveries": endpoints * events,
        "seconds": round(seconds, 2),
        "events_per_s": round(endpoints * events / seconds, 1),
        "events_per_request": round(endpoints * events / requests, 1),
        "kept_batches": WebhookDelivery.objects.count(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument(
        "--endpoints", default="1,4", help="comma-separated endpoint counts, one run each"
    )
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.endpoints.split(",")]
    report = Report(
        started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        args=vars(args),
        load_average_at_start=" ".join(f"{x:.2f}" for x in os.getloadavg()),
    )
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    call_command("migrate", verbosity=0)
    print(f"load average at start: {report.load_average_at_start}", flush=True)
    topic = f"bench-rank-events-{RUN_TAG}"
    bodies = event_bodies(args.events)
    receiver = Receiver()
    try:
        report.baseline_events_per_s = round(baseline(receiver, bodies), 1)
        publish(topic, bodies)
        for endpoints in counts:
            run = deliver(receiver=receiver, topic=topic, endpoints=endpoints, events=args.events)
            run["vs_baseline"] = round(run["events_per_s"] / report.baseline_events_per_s, 2)
            report.runs.append(run)
    finally:
        receiver.close()
        WebhookEndpoint.objects.all().delete()
        admin = KafkaAdminClient(bootstrap_servers=settings.KAFKA_BOOTSTRAP_SERVERS)
        admin.delete_topics([topic])
        admin.close()
    print(f"\nbaseline (one client, POST loop): {report.baseline_events_per_s:,.0f} events/s")
    for run in report.runs:
        print(
            f"deliver_webhooks, {run['endpoints']:>2} endpoint(s): "
            f"{run['events_per_s']:>9,.0f} events/s ({run['vs_baseline']:.2f}x the baseline; "
            f"{run['deliveries']:,} deliveries in {run['seconds']} s, "
            f"{run['events_per_request']} events per request; "
            f"{run['kept_batches']} batch(es) kept)"
        )
    out = RESULTS_DIR / f"webhooks-{RUN_TAG}.json"
    out.write_text(json.dumps(asdict(report), indent=2, default=str))
    print(f"report: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
