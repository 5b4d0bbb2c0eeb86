"""Reads, one module per question they answer.

- ``pages``: the public board page's one read per period;
- ``cards``: the player card (a profile and its standing on every active board);
- ``boards``: which boards exist (``BoardRef``, lookups and lists, memoized or fresh);
- ``rankings``: a board's ranks in Redis (pages, a player, around a player, friends, the daily
  and weekly boards);
- ``top``: the top list, from the per-second snapshot or the live board;
- ``sizes``: how many players each board holds in Redis;
- ``overview``: what staff see of a board;
- ``runs``: the latest rebuild and reconcile runs;
- ``scores``: each player's board score computed from PostgreSQL (rebuild, reconcile,
  close-out);
- ``members``: which and how many players a board holds per PostgreSQL (reconcile);
- ``days``: the UTC days a board has results on;
- ``results``: stored match results (a player's, each player's latest, which seasons have any);
- ``offsets``: the Kafka offsets of stored results (recovery, the failover gap search);
- ``events``: what the boards' rank events outboxes still hold.
"""
