"""Every Redis key of the product is built here, and nowhere else.

``{b<board>}`` is a Redis Cluster hash tag: every key of one board lands in one slot (its
season-long, daily and weekly boards, their rebuild keys, its top-list snapshot and its
ingestion watermark), so a script may touch all of them in one call, and the boards of a
season spread over the cluster's nodes. No script touches keys of two boards.
The prefix (``lb`` by default) comes from settings at call time so tests can isolate keys.
"""

from __future__ import annotations

import hashlib
from datetime import date

from django.conf import settings


def _board_tag(board_id: int) -> str:
    return f"{settings.LEADERBOARD_KEY_PREFIX}:{{b{int(board_id)}}}"


def board(*, board_id: int) -> str:
    """``lb:{b7}``: the board's season-long sorted set, member = player id, score = encoded."""
    return _board_tag(board_id)


def daily_board(*, board_id: int, day: date) -> str:
    """``lb:{b7}:d:2026-10-12``: the board of one UTC day."""
    return f"{_board_tag(board_id)}:d:{day.isoformat()}"


def daily_board_pattern(*, board_id: int) -> str:
    """SCAN pattern matching the board's daily boards (and keys derived from them: filter
    with ``daily_board_day``)."""
    return f"{_board_tag(board_id)}:d:*"


def daily_board_day(*, board_id: int, key: str) -> date | None:
    """The day of ``key`` if it is exactly one of the board's daily boards, else None."""
    head = f"{_board_tag(board_id)}:d:"
    if not key.startswith(head) or len(key) != len(head) + 10:
        return None
    try:
        return date.fromisoformat(key[len(head) :])
    except ValueError:
        return None


def weekly_board(*, board_id: int, iso_year: int, iso_week: int) -> str:
    """``lb:{b7}:w:2026-W41``: the board of one ISO week, built from the daily boards."""
    return f"{_board_tag(board_id)}:w:{iso_year:04d}-W{iso_week:02d}"


def weekly_late(*, board_id: int) -> str:
    """``lb:{b7}:weeks-late``: set of the ISO weeks (``2026-W41``) that results written to a
    day of a past week since its weekly board was last built; the weekly build rebuilds them."""
    return f"{_board_tag(board_id)}:weeks-late"


def board_index(*, board_key: str) -> str:
    """The player -> wide key hash beside the sorted set ``board_key`` of a board with
    tie-break columns (its members are key + player id: leaderboard/codec.py WideKeyCodec).
    Same slot as the set; expires and is renamed with it."""
    return f"{board_key}:ix"


def rebuild_temp(*, board_key: str) -> str:
    """``lb:{b7}:rebuild``: the temporary key a rebuild fills before RENAMEing it over."""
    return f"{board_key}:rebuild"


def rebuild_marker(*, board_key: str) -> str:
    """Present while ``board_key`` is being rebuilt: "pending", or the PostgreSQL snapshot."""
    return f"{board_key}:rebuild:marker"


def rebuild_pending(*, board_key: str) -> str:
    """List of results applied while the marker is "pending" (snapshot not yet taken)."""
    return f"{board_key}:rebuild:pending"


def rebuild_delta(*, board_key: str) -> str:
    """Board-shaped ZSET of results applied during a rebuild but absent from its snapshot."""
    return f"{board_key}:rebuild:delta"


def rebuild_done(*, board_key: str) -> str:
    """The PostgreSQL snapshot of the rebuild that last replaced ``board_key``: a result that
    snapshot could see is on the board already, and a late apply of it must not count it again."""
    return f"{board_key}:rebuild:done"


def top_snapshot(*, board_id: int) -> str:
    """``lb:{b7}:top``: the pre-encoded top list refreshed every second by a task."""
    return f"{_board_tag(board_id)}:top"


def top_snapshot_version(*, board_id: int) -> str:
    """``lb:{b7}:top:version``: the version of ``top_snapshot`` (written with it by one script),
    so a process checks for a newer snapshot without reading the snapshot itself."""
    return f"{_board_tag(board_id)}:top:version"


def board_pattern(*, board_id: int) -> str:
    """SCAN pattern for every key of a board (close-out, tests)."""
    return f"{_board_tag(board_id)}*"


def prefix_pattern() -> str:
    """SCAN pattern for every key under the configured prefix (tests clean up with it)."""
    return f"{settings.LEADERBOARD_KEY_PREFIX}:*"


def ingest_applied_offsets(*, board_id: int, topic: str) -> str:
    """``lb:{b7}:applied:<topic>``: hash partition -> highest offset of ``topic`` whose results
    for this board are on it.

    Ingestion's bounded dedup state: one small field per partition and board, in the board's
    own slot, so the script that writes the board moves it in the same call (docs/ingestion.md).
    """
    return f"{_board_tag(board_id)}:applied:{topic}"


def rank_events_outbox(*, board_id: int, topic: str, partition: int) -> str:
    """``lb:{b7}:events:<topic>:<partition>``: stream of the board's rank events caused by
    results of one partition of ``topic`` and not yet acknowledged by Kafka.

    The apply script adds one entry per call (all its events) atomically with the write and the
    watermark; the consumer publishes the entry to the rank-events topic and deletes it before
    committing the batch's offsets (docs/events.md). One stream per partition, so the owner of a
    partition finds a crashed predecessor's leftovers where it resumes.
    """
    return f"{_board_tag(board_id)}:events:{topic}:{int(partition)}"


def rank_events_corrections_outbox(*, board_id: int) -> str:
    """``lb:{b7}:events:corrections``: stream of the board's rank events caused by staff
    corrections (voids, bans) not yet acknowledged by Kafka (leaderboard/services/events.py)."""
    return f"{_board_tag(board_id)}:events:corrections"


def rank_events_corrections_pending(*, board_id: int) -> str:
    """``lb:{b7}:events:corrections:pending``: hash "<cause>/<player>" -> the player's standing
    before the correction's rebuild (correction_events.lua)."""
    return f"{_board_tag(board_id)}:events:corrections:pending"


def board_intact(*, board_id: int) -> str:
    """``lb:{b7}:intact``: present while Redis is known to hold every key of the board
    (season-long, daily and weekly boards, watermark) as PostgreSQL has them.

    Set by the recovery once the board is rebuilt (or found with nothing to hold); in the
    board's slot, so a Redis that loses the board loses this key with it, and the read
    scripts check it in the same call: no key, no answer as truth (docs/reliability.md).
    """
    return f"{_board_tag(board_id)}:intact"


def board_checked(*, board_id: int) -> str:
    """``lb:{b7}:checked``: ``run:<run id>`` of the Redis server process that compared the
    board with PostgreSQL (or rebuilt it) since it started. Written with replication off
    (``board_mark_checked.lua``), and vouching only on the process whose run id it holds
    (a copy of memory, an AOF rewrite or a snapshot, can bring it back after a restart), so
    a restart or a failover, which may have lost the last writes, makes the board's reads
    answer 503 until the recovery has checked it (docs/ingestion.md, "Redis losing data")."""
    return f"{_board_tag(board_id)}:checked"


def board_recovering(*, board_id: int) -> str:
    """``lb:{b7}:recovering``: held (with an expiry) while one process rebuilds the lost board,
    so the every-few-seconds recovery task never runs two rebuilds of it at once."""
    return f"{_board_tag(board_id)}:recovering"


def redis_run_id_seen() -> str:
    """The Redis server run id (INFO server) the recovery last saw: a new one means Redis
    restarted and may have come back without its last writes."""
    return f"{settings.LEADERBOARD_KEY_PREFIX}:recovery:run-id"


def redis_restart_check_lock() -> str:
    """Held while one process reconciles every board after a new Redis run id."""
    return f"{settings.LEADERBOARD_KEY_PREFIX}:recovery:run-id:lock"


def ingest_consumer_stats(*, consumer_id: str) -> str:
    """Hash of one consumer process's counters, rewritten every stats interval."""
    return f"{settings.LEADERBOARD_KEY_PREFIX}:ingest:stats:{consumer_id}"


def ingest_consumers() -> str:
    """ZSET consumer id -> unix time of its last stats write (who is alive, for /metrics.json)."""
    return f"{settings.LEADERBOARD_KEY_PREFIX}:ingest:consumers"


def ingest_history() -> str:
    """ZSET of every consumer's stats samples of the last hour (member = one JSON sample, score =
    its unix time): the staff dashboard's charts (ingestion.history)."""
    return f"{settings.LEADERBOARD_KEY_PREFIX}:ingest:history"


def webhook_deliverer_stats(*, deliverer_id: str) -> str:
    """JSON of one webhook deliverer process's per-endpoint counters, rewritten every stats
    interval and expiring on its own (webhooks/stats.py)."""
    return f"{settings.LEADERBOARD_KEY_PREFIX}:webhooks:stats:{deliverer_id}"


def webhook_deliverers() -> str:
    """ZSET deliverer id -> unix time of its last stats write (who is alive)."""
    return f"{settings.LEADERBOARD_KEY_PREFIX}:webhooks:deliverers"


def webhook_demo_receipts() -> str:
    """LIST of the last requests the demo webhook receiver got, newest first (JSON each)."""
    return f"{settings.LEADERBOARD_KEY_PREFIX}:webhooks:demo-receipts"


def weekly_build_temp(*, board_key: str, token: str) -> str:
    """Private key one weekly-board build fills before RENAMEing it over ``board_key``.

    ``token`` is unique per build, so two concurrent builds never merge into one temp key.
    """
    return f"{board_key}:build:{token}"


def weekly_build_source(*, board_key: str, token: str) -> str:
    """A frozen COPY of one daily board that a weekly build iterates without it moving."""
    return f"{board_key}:build:{token}:src"


# Idents up to this long (any IP address) go into the throttle key as they are.
_THROTTLE_IDENT_MAX_CHARS = 64


def throttle_window(*, scope: str, ident: str, window: int) -> str:
    """Request counter of one client in one fixed throttle window (lives in the cache Redis).

    ``ident`` is normally an IP address; anything longer is replaced by its hash, so a client
    cannot make a key (or the per-process window table) as large as a header it sends.
    """
    if len(ident) > _THROTTLE_IDENT_MAX_CHARS:
        ident = "h-" + hashlib.blake2b(ident.encode(errors="replace"), digest_size=16).hexdigest()
    return f"{settings.LEADERBOARD_KEY_PREFIX}:throttle:{scope}:{ident}:{window}"


def weekly_build_lock(*, board_key: str) -> str:
    """Held while one process builds a weekly board on demand, so requests don't pile builds."""
    return f"{board_key}:build-lock"


def weekly_build_failed(*, board_key: str) -> str:
    """Set for a while when a weekly board could not be built on demand (a cumulative sum past
    the codec), so readers are told so rather than each rebuilding seven days again."""
    return f"{board_key}:build-failed"


# Players per name-cache hash: small enough that each hash stays a listpack (Redis's compact
# encoding, hash-max-listpack-entries 128 by default), large enough that the key overhead
# is shared by many players.
PLAYER_NAMES_BUCKET_SIZE = 100


def player_names(*, player_id: int) -> str:
    """``lb:pn:420``: the name-cache hash holding ``player_id`` (player id // 100): field =
    player id, value = ``<revision>:<country or -->`` + the visible name (leaderboard/
    player_names.py). Each bucket hashes to its own slot, so the cache spreads over the
    cluster."""
    return f"{settings.LEADERBOARD_KEY_PREFIX}:pn:{int(player_id) // PLAYER_NAMES_BUCKET_SIZE}"


def player_names_intact() -> str:
    """Present once the name cache was rebuilt from PostgreSQL: a Redis that lost the cache
    loses this key (or restarts, which the recovery sees), and the recovery rebuilds it."""
    return f"{settings.LEADERBOARD_KEY_PREFIX}:pn-intact"


def player_names_rebuilding() -> str:
    """Held (with an expiry) while one process rebuilds the name cache."""
    return f"{settings.LEADERBOARD_KEY_PREFIX}:pn-rebuilding"
