from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4

from ingestion.selectors import ingest_consumer_stats_list

from .access import operators_only, request_from_operator
from .health import health_check, health_check_shared
from .metrics import metrics_exposition


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """200 when every dependency answers, 503 naming the ones that don't.

    ``boards`` lists the boards Redis lost (their reads answer 503 meanwhile) and those being
    recovered; that alone is ``degraded`` with a 200: every web process shares the one Redis,
    so taking this one out of a load balancer would serve nobody better.

    The public gets the status and the names of the dependencies down, nothing more: an error's
    text names hosts, ports and versions. Operators (``access.request_from_operator``) get each
    dependency's latency and error and the boards.
    """
    operator = request_from_operator(request)
    health = health_check() if operator else health_check_shared()
    states, boards = health.dependencies, health.boards
    down = [state.name for state in states if not state.ok]
    status = "unavailable" if down else ("degraded" if boards.missing else "ok")
    body: dict[str, object] = {"status": status, "down": down}
    if operator:
        body["boards"] = {
            "missing": list(boards.missing),
            "recovering": list(boards.recovering),
            **({"error": boards.error} if boards.error else {}),
        }
        body["dependencies"] = {
            state.name: {
                "ok": state.ok,
                "latencyMs": round(state.latency_ms, 2),
                **({"error": state.error} if state.error else {}),
            }
            for state in states
        }
    return JsonResponse(body, status=200 if not down else 503)


@never_cache
@require_GET
@operators_only
def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text: HTTP requests of every web worker, board sizes, top-snapshot ages.

    Text format 0.0.4: what every Prometheus 2 (Debian's included) and compatible agent reads.
    The consumers and the Celery worker serve their own metrics (docs/operations.md). Operators
    only (``access.operators_only``): 403 for anyone else."""
    return HttpResponse(metrics_exposition(), content_type=CONTENT_TYPE_PLAIN_0_0_4)


@never_cache
@require_GET
@operators_only
def metrics_json(request: HttpRequest) -> JsonResponse:
    """Each ingestion consumer's rate, totals and lag as JSON, from the stats the consumers
    publish to Redis (the admin's view of ingestion; docs/ingestion.md)."""
    consumers = ingest_consumer_stats_list()
    return JsonResponse(
        {
            "ingestion": {
                "consumers": [
                    {
                        "consumerId": c.consumer_id,
                        "topic": c.topic,
                        "groupId": c.group_id,
                        "appliedPerSecond": c.applied_per_second,
                        "records": c.records,
                        "applied": c.applied,
                        "duplicates": c.duplicates,
                        "deadLetters": c.dead_letters,
                        "notCounted": c.not_counted,
                        "lag": c.lag,
                        "updatedAt": c.updated_at,
                    }
                    for c in consumers
                ],
                "appliedPerSecond": round(sum(c.applied_per_second for c in consumers), 1),
                "lag": sum(c.lag or 0 for c in consumers),
            }
        }
    )


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler400 (a request Django refuses before any view answers: too many query fields, a
    body past the upload limits, a Host not allowed): the API's error shape under /api/, Django's
    plain 400 page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": f"bad request: {exception}"}, status=400)
    return defaults.bad_request(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: the API's error shape under /api/, Django's plain 500 page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Internal server error"}, status=500)
    return defaults.server_error(request)
