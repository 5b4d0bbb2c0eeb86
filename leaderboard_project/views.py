from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from .health import dependencies_check


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """200 when every dependency answers, 503 naming the ones that don't."""
    states = dependencies_check()
    down = [state.name for state in states if not state.ok]
    body = {
        "status": "ok" if not down else "unavailable",
        "down": down,
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
