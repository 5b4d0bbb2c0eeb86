"""Writes of the webhooks, one module per concept: ``endpoints`` (registering, secrets),
``deliveries`` (batches kept in PostgreSQL: keep, claim, retry, give up, resend, purge),
``receiver`` (the demo receiver's memory). Callers import from here.
"""

from __future__ import annotations

from .deliveries import (
    BatchToKeep,
    KeptBatch,
    webhook_deliveries_keep,
    webhook_deliveries_postpone,
    webhook_deliveries_purge,
    webhook_deliveries_resend,
    webhook_delivery_claim_due,
    webhook_delivery_delivered,
    webhook_delivery_failed,
)
from .endpoints import (
    SECRET_MIN_LENGTH,
    webhook_boards_clean,
    webhook_endpoint_create,
    webhook_endpoint_secret_set,
    webhook_endpoint_url_set,
    webhook_event_types_clean,
    webhook_secret_clean,
    webhook_url_clean,
)
from .receiver import DEMO_RECEIPTS_KEPT, DemoReceipt, demo_receipt_record

__all__ = [
    "DEMO_RECEIPTS_KEPT",
    "SECRET_MIN_LENGTH",
    "BatchToKeep",
    "DemoReceipt",
    "KeptBatch",
    "demo_receipt_record",
    "webhook_boards_clean",
    "webhook_deliveries_keep",
    "webhook_deliveries_postpone",
    "webhook_deliveries_purge",
    "webhook_deliveries_resend",
    "webhook_delivery_claim_due",
    "webhook_delivery_delivered",
    "webhook_delivery_failed",
    "webhook_endpoint_create",
    "webhook_endpoint_secret_set",
    "webhook_endpoint_url_set",
    "webhook_event_types_clean",
    "webhook_secret_clean",
    "webhook_url_clean",
]
