"""Settings of the read benchmark: the product's settings plus a bare view to compare with.

The environment (REDIS_URL, DATABASE_URL, ...) is set by bench/read/run.py before Django
starts, and read by leaderboard_project/settings.py as usual.
"""

from leaderboard_project.settings import *  # noqa: F403

ROOT_URLCONF = "bench.read.urls"
