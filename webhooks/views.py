"""The demo receiver: a webhook endpoint of our own, and the staff page showing what it got.

``make run`` registers a webhook to ``POST /webhooks/demo-receiver/<endpoint id>``
(bootstrap_demo). It checks each request as a real receiver should: the signature over the raw
body with the endpoint's secret and the signed time within five minutes, and the event-ids
header against the body; it answers 204, or 401 with the reason (so a refused request is
retried like any failure). Every request, refused ones too, is kept (the last 50, in Redis)
for /admin/webhooks/receiver. On only with ``WEBHOOK_DEMO_RECEIVER`` (default: DEBUG): it is a
public URL that writes to Redis, so production has it off (404).
"""

from __future__ import annotations

import time
from typing import Any

import orjson
from django.conf import settings
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.template.response import TemplateResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from redis.exceptions import RedisError

from .crypto import SecretUnreadable
from .selectors import demo_receipts_latest, webhook_endpoint_secret
from .services import DemoReceipt, demo_receipt_record
from .signing import (
    DELIVERY_HEADER,
    EVENT_IDS_HEADER,
    SIGNATURE_HEADER,
    SignatureInvalid,
    signature_verify,
)

# The staff page lists at most this many of the latest events (from the latest requests).
EVENTS_SHOWN = 200
REFRESH_SECONDS = 5


def _events_of(body: bytes) -> list[Any]:
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return []
    return [e for e in parsed if isinstance(e, dict)] if isinstance(parsed, list) else []


def _check(*, secret: str, request: HttpRequest, events: list[Any]) -> str:
    """Why the request is refused, or "" when it is genuine."""
    try:
        signature_verify(
            secret=secret,
            header=request.headers.get(SIGNATURE_HEADER),
            body=request.body,
            now=time.time(),
        )
    except SignatureInvalid as exc:
        return str(exc)
    listed = request.headers.get(EVENT_IDS_HEADER, "")
    if listed.split(",") != [str(e.get("eventId")) for e in events]:
        return f"{EVENT_IDS_HEADER} does not list the body's events in order"
    return ""


@csrf_exempt
@require_POST
def demo_receiver_inbox(request: HttpRequest, endpoint_id: int) -> HttpResponse:
    if not settings.WEBHOOK_DEMO_RECEIVER:
        raise Http404("the demo receiver is off (WEBHOOK_DEMO_RECEIVER)")
    try:
        secret = webhook_endpoint_secret(endpoint_id=endpoint_id)
    except SecretUnreadable as exc:
        return JsonResponse({"detail": str(exc)}, status=401)
    if secret is None:
        return JsonResponse({"detail": f"no webhook endpoint {endpoint_id}"}, status=404)
    events = _events_of(request.body)
    reason = _check(secret=secret, request=request, events=events)
    demo_receipt_record(
        receipt=DemoReceipt(
            received_at=time.time(),
            endpoint_id=endpoint_id,
            delivery_id=request.headers.get(DELIVERY_HEADER, ""),
            verified=not reason,
            reason=reason,
            event_ids_header=request.headers.get(EVENT_IDS_HEADER, "")[:4000],
            events=events,
        )
    )
    if reason:
        return JsonResponse({"detail": reason}, status=401)
    return HttpResponse(status=204)


def demo_receiver_page(request: HttpRequest) -> HttpResponse:
    """Staff with the permission to view webhook endpoints (admin_view in the URL conf checks
    staff): the receiver's latest requests and events."""
    if not request.user.has_perm("webhooks.view_webhookendpoint"):
        raise PermissionDenied(
            "viewing the demo receiver needs the permission to view webhook endpoints"
        )
    error = ""
    receipts: list[DemoReceipt] = []
    try:
        receipts = demo_receipts_latest()
    except RedisError as exc:
        error = f"The receiver's requests are unavailable: Redis did not answer ({exc})."
    rows = []
    for receipt in receipts:
        for event in reversed(receipt.events):
            rows.append((receipt, event))
            if len(rows) >= EVENTS_SHOWN:
                break
        if len(rows) >= EVENTS_SHOWN:
            break
    context = {
        **admin.site.each_context(request),
        "title": "Demo webhook receiver",
        "enabled": settings.WEBHOOK_DEMO_RECEIVER,
        "receipts": receipts,
        "rows": rows,
        "error": error,
        "refresh_seconds": REFRESH_SECONDS,
        "verified": sum(1 for r in receipts if r.verified),
    }
    return TemplateResponse(request, "admin/webhooks/receiver.html", context)
