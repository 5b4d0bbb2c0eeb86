from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from ingestion.selectors import ingest_consumer_stats_list

from .health import boards_check, dependencies_check


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """200 when every dependency answers, 503 naming the ones that don't.

    ``boards`` lists the boards Redis lost (their reads answer 503 meanwhile) and those being
    recovered; that alone is ``degraded`` with a 200: every web process shares the one Redis,
    so taking this one out of a load balancer would serve nobody better.
    """
    states = dependencies_check()
    down = [state.name for state in states if not state.ok]
    boards = boards_check()
    status = "unavailable" if down else ("degraded" if boards.missing else "ok")
    body = {
        "status": status,
        "down": down,
        "boards": {
            "missing": list(boards.missing),
            "recovering": list(boards.recovering),
            **({"error": boards.error} if boards.error else {}),
        },
        "dependencies": {
            state.name: {
                "ok": state.ok,
                "latencyMs": round(state.latency_ms, 2),
                **({"error": state.error} if state.error else {}),
            }
            for state in states
        },
    }
    return JsonResponse(body, status=200 if not down else 503)


@never_cache
@require_GET
def metrics(request: HttpRequest) -> JsonResponse:
    """Operational counters as JSON: each ingestion consumer's rate, totals and lag."""
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


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: the API's error shape under /api/, Django's plain 500 page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Internal server error"}, status=500)
    return defaults.server_error(request)
