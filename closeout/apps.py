from django.apps import AppConfig


class CloseoutConfig(AppConfig):
    name = "closeout"
    verbose_name = "Close-out and rewards"
