"""Settings of the read benchmark: the local services' settings plus a bare view to compare with.

The environment (REDIS_URL, DATABASE_URL, LB_REDIS_MODE, ...) is set by bench/read/run.py before
Django starts, and read by leaderboard_project/local_clusters.py and settings.py as usual.
"""

from leaderboard_project.local_clusters import *  # noqa: F403

ROOT_URLCONF = "bench.read.urls"
