"""``manage.py deliver_webhooks``: POST rank events to the webhook endpoints until stopped."""

from __future__ import annotations

import logging
import signal
import sys
from types import FrameType
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from leaderboard.management.arguments import SECONDS_MAX, number_between
from webhooks.deliverer import DelivererOptions, DelivererStalled, WebhookDeliverer

logger = logging.getLogger(__name__)
# The exit status of a deliverer that ended itself to be restarted (EX_SOFTWARE, as the
# ingestion consumer's poll watchdog).
STALLED_EXIT_STATUS = 70


class Command(BaseCommand):
    help = (
        "Deliver rank events (KAFKA_RANK_EVENTS_TOPIC) to the active webhook endpoints, signed, "
        "batched, retried for WEBHOOK_RETRY_HOURS. SIGTERM/SIGINT finish the requests in "
        "flight, commit what is delivered or kept, and exit 0."
    )
    # As the ingestion consumer: no system checks (URL conf, admin) for a process serving none.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--topic", help="default: KAFKA_RANK_EVENTS_TOPIC")
        parser.add_argument("--dead-letter-topic", help="default: WEBHOOK_DEAD_LETTER_TOPIC")
        parser.add_argument("--group", help="consumer group id; default: WEBHOOK_CONSUMER_GROUP")
        parser.add_argument(
            "--instance-id", help="static group membership id; default: WEBHOOK_GROUP_INSTANCE_ID"
        )
        parser.add_argument(
            "--stats-interval",
            type=number_between(0, SECONDS_MAX),
            help="default: WEBHOOK_STATS_INTERVAL_SECONDS",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        deliverer = WebhookDeliverer(
            DelivererOptions.from_settings(
                topic=options["topic"],
                dead_letter_topic=options["dead_letter_topic"],
                group_id=options["group"],
                group_instance_id=options["instance_id"],
                stats_interval_seconds=options["stats_interval"],
            )
        )

        def stop(signum: int, frame: FrameType | None) -> None:
            deliverer.request_stop()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        try:
            deliverer.run()
        except DelivererStalled as exc:
            logger.critical("%s", exc)
            sys.exit(STALLED_EXIT_STATUS)
