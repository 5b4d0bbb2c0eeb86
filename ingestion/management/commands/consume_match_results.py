"""``manage.py consume_match_results``: run the ingestion consumer until SIGTERM or SIGINT."""

from __future__ import annotations

import gc
import signal
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ingestion.consumer import ConsumerOptions, MatchResultConsumer
from ingestion.metrics import metrics_server_start
from leaderboard.management.arguments import (
    PORT_MAX,
    SECONDS_MAX,
    int_between,
    number_between,
)

# A batch past this holds a poll's worth of results in memory for no gain in throughput.
MAX_POLL_RECORDS_MAX = 100_000


class Command(BaseCommand):
    help = (
        "Consume match results from Kafka into PostgreSQL and the Redis boards, exactly once. "
        "SIGTERM/SIGINT finish and commit the batch in hand, then exit 0."
    )
    # Django's system checks import the whole URL conf (DRF, drf-spectacular, every view) and
    # walk the admin: about a quarter of a consumer's start-up CPU, for a process that serves
    # neither. `manage.py migrate`, which runs before the processes start (`make run`), and
    # `manage.py check` run them.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--topic", help="default: KAFKA_MATCH_RESULTS_TOPIC")
        parser.add_argument("--dead-letter-topic", help="default: KAFKA_DEAD_LETTER_TOPIC")
        parser.add_argument("--group", help="consumer group id; default: KAFKA_CONSUMER_GROUP")
        parser.add_argument(
            "--instance-id", help="static group membership id; default: INGEST_GROUP_INSTANCE_ID"
        )
        parser.add_argument(
            "--max-poll-records",
            type=int_between(1, MAX_POLL_RECORDS_MAX),
            help="default: INGEST_MAX_POLL_RECORDS",
        )
        parser.add_argument(
            "--stats-interval",
            type=number_between(0, SECONDS_MAX),
            help="default: INGEST_STATS_INTERVAL_SECONDS",
        )
        parser.add_argument(
            "--metrics-port",
            type=int_between(0, PORT_MAX),
            help="serve Prometheus metrics on this port (METRICS_LISTEN_ADDRESS); 0: don't; "
            "default: INGEST_METRICS_PORT",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if settings.PROMETHEUS_MULTIPROC_DIR:
            # Its counters would land in that folder and be served twice: by its own port and
            # by whichever process sums the folder (docs/operations.md, "Metrics").
            raise CommandError(
                "PROMETHEUS_MULTIPROC_DIR is set: a consumer serves its own metrics "
                "(--metrics-port / INGEST_METRICS_PORT); unset it for this process"
            )
        port = options["metrics_port"]
        port = settings.INGEST_METRICS_PORT if port is None else port
        if port:
            metrics_server_start(address=settings.METRICS_LISTEN_ADDRESS, port=port)
        consumer = MatchResultConsumer(
            ConsumerOptions.from_settings(
                topic=options["topic"],
                dead_letter_topic=options["dead_letter_topic"],
                group_id=options["group"],
                group_instance_id=options["instance_id"],
                max_poll_records=options["max_poll_records"],
                stats_interval_seconds=options["stats_interval"],
            )
        )

        def stop(signum: int, frame: FrameType | None) -> None:
            consumer.request_stop()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        # Every batch allocates tens of thousands of short-lived objects, and each full
        # collection used to walk everything Django and kafka-python loaded at start-up too.
        # Frozen, those are never scanned again: 52 -> 39 us of CPU per result for one consumer
        # draining 300,000 results (a one-off measurement, in the message of commit 008c5d9).
        gc.collect()
        gc.freeze()
        consumer.run()
