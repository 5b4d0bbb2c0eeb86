from django.apps import AppConfig


class SeasonsConfig(AppConfig):
    name = "seasons"
    verbose_name = "Seasons and rewards"
