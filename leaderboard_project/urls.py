from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import (
    SpectacularAPIView,
    SpectacularRedocView,
    SpectacularSwaggerView,
)

from leaderboard.throttling import AnonFixedWindowThrottle
from webhooks import views as webhook_views

from . import dashboard, views

# The admin index links the staff dashboard (a plain admin view, no model of its own).
admin.site.index_template = "admin/leaderboard_index.html"

# The schema and its docs page are public too (and generating the schema is not free).
_throttled = {"throttle_classes": [AnonFixedWindowThrottle]}

urlpatterns = [
    # The read API first: its hot endpoints resolve without trying the other patterns.
    path("api/", include("leaderboard.urls")),
    # Before the admin's own routes, which would otherwise answer for it.
    path(
        "admin/dashboard",
        admin.site.admin_view(dashboard.staff_dashboard),
        name="staff-dashboard",
    ),
    path(
        "admin/webhooks/receiver",
        admin.site.admin_view(webhook_views.demo_receiver_page),
        name="webhook-demo-receiver",
    ),
    path("admin/", admin.site.urls),
    path("healthz", views.healthz, name="healthz"),
    path("metrics", views.metrics, name="metrics"),
    path("metrics.json", views.metrics_json, name="metrics-json"),
    path("api/", include("closeout.urls")),
    path("api/schema", SpectacularAPIView.as_view(**_throttled), name="schema"),
    path("api/docs", SpectacularSwaggerView.as_view(url_name="schema", **_throttled), name="docs"),
    path(
        "api/redoc",
        SpectacularRedocView.as_view(
            url_name="schema", template_name="api/redoc.html", **_throttled
        ),
        name="redoc",
    ),
    path("api/", include("ingestion.urls")),
    path("webhooks/", include("webhooks.urls")),
    path("", include("leaderboard.page_urls")),
    path("", include("closeout.page_urls")),
]

# JSON 404s under /api/ (the API's error shape); the default page elsewhere.
handler404 = "leaderboard.views.not_found"
# What Django refuses before a view answers (too many fields, a body too large): JSON under /api/.
handler400 = "leaderboard_project.views.bad_request"
# An unhandled exception: JSON under /api/ (clients parse it), Django's bare 500 page elsewhere;
# with DEBUG off neither says anything about the error or the settings.
handler500 = "leaderboard_project.views.server_error"
