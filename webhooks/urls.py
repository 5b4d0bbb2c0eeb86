from django.urls import path

from . import views

urlpatterns = [
    path(
        "demo-receiver/<int:endpoint_id>",
        views.demo_receiver_inbox,
        name="webhook-demo-receiver-inbox",
    ),
]
