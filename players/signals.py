"""``profiles_changed``: sent (``player_ids=[...]``) once a profile write commits.

The players app sits below the leaderboard app in the layers and cannot call it; the
leaderboard app, which keeps the name cache in Redis (leaderboard/player_names.py), connects
to this signal in its AppConfig. Sent with ``send`` (not ``send_robust``): a cache write that
fails raises to the writer, which retries (the consumer) or reports it (the admin, the PUT).
"""

from __future__ import annotations

from django.dispatch import Signal

profiles_changed = Signal()
