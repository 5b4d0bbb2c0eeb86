"""REDIS_READ_FROM_REPLICAS=true: the public read selectors are served by the slot's replica.

On the local Redis Cluster: a board is written on its master and acknowledged by its replica
(WAIT), then read through every read selector with replicas on and off; the answers must be the
same, and the replica's own command counters must show it ran the reads (EVALSHA_RO/EVAL_RO).
With the replica SIGKILLed, every read still answers, and right, from the master.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone
from redis.cluster import RedisCluster

from devservices import faults
from leaderboard import keys
from leaderboard.redis import get_board_read_redis, get_board_redis
from leaderboard.selectors.rankings import (
    BoardUnavailableError,
    board_around_get,
    board_friends_get,
    board_player_get,
    board_ranks_get,
)
from tests.helpers import as_board, main_board_id, make_season
from tests.infra.clusters import (
    healthy_layout,
    node_client,
    topology,
    wait_for,
)
from tests.leaderboard.board_fixtures import KNOWN_BOARD, entry, write_board, write_daily_board

pytestmark = [pytest.mark.clusters, pytest.mark.slow, pytest.mark.django_db]


def _script_reads(port: int) -> int:
    stats: dict[str, Any] = node_client(port).info("commandstats")
    return sum(
        int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in ("evalsha_ro", "eval_ro")
    )


def _reads(board: Any) -> tuple[Any, ...]:
    return (
        board_ranks_get(board=board, start_rank=1, count=10),
        board_player_get(board=board, player_id=4),
        board_around_get(board=board, player_id=3, radius=2),
        board_friends_get(board=board, player_ids=[1, 6, 10, 99]),
    )


@pytest.mark.usefixtures("on_cluster", "redis_cluster_up")
def test_reads_from_replicas_answer_as_the_master_and_run_on_the_replica(settings) -> None:
    season = make_season()
    board = as_board(season)
    key = keys.board(board_id=main_board_id(season.id))
    master = int(get_board_redis().get_node_from_key(key).port)  # type: ignore[union-attr]
    master_id = next(n.node_id for n in topology(master) if n.port == master)
    replica = next(n.port for n in topology(master) if n.master_id == master_id)

    # On the master, acknowledged by the replica before anyone reads (WAIT on the same
    # connection: a pipeline without MULTI is one connection).
    writer = node_client(master)
    write_board(writer, key, season, KNOWN_BOARD)
    assert writer.execute_command("WAIT", 1, 5000) >= 1

    settings.REDIS_READ_FROM_REPLICAS = False
    from_master = _reads(board)
    assert [e.player_id for e in from_master[0]] == [2, 1, 3, 5, 4, 10, 6]

    settings.REDIS_READ_FROM_REPLICAS = True
    assert get_board_read_redis() is not get_board_redis()
    before = _script_reads(replica)
    assert _reads(board) == from_master
    # Four selectors, one script each (two when the replica had not cached it yet: NOSCRIPT,
    # then EVAL_RO; NOSCRIPT is counted as a call as well).
    assert _script_reads(replica) - before >= 4
    get_board_redis().delete(key)


@pytest.mark.usefixtures("on_cluster", "redis_cluster_up")
def test_reads_go_on_from_the_master_while_the_replica_is_dead(settings, caplog) -> None:
    season = make_season()
    board = as_board(season)
    key = keys.board(board_id=main_board_id(season.id))
    master = int(get_board_redis().get_node_from_key(key).port)  # type: ignore[union-attr]
    master_id = next(n.node_id for n in topology(master) if n.port == master)
    replica = next(n.port for n in topology(master) if n.master_id == master_id)
    write_board(node_client(master), key, season, KNOWN_BOARD)
    settings.REDIS_READ_FROM_REPLICAS = False
    from_master = _reads(board)
    settings.REDIS_READ_FROM_REPLICAS = True
    assert _reads(board) == from_master  # the read client knows the replica now

    faults.redis_cluster_kill(replica)
    try:
        # Every read answers, and right, from the first one after the kill until the cluster
        # has marked the replica failed and well after (the client's slot map still names it
        # until it refreshes).
        deadline = time.monotonic() + 15
        with caplog.at_level(logging.INFO, logger="leaderboard.scripts"):
            while time.monotonic() < deadline:
                assert _reads(board) == from_master
        # The dead replica was tried and the master answered instead.
        assert any("reading the master" in r.getMessage() for r in caplog.records)
        # Answering for the replica, the master vouches for the board as its own reads do: with
        # the checked key gone (a master just promoted, or restarted, before the recovery
        # compared the board with PostgreSQL) the read is a 503, not the board as truth.
        checked = keys.board_checked(board_id=board.id)
        held = node_client(master).dump(checked)
        assert held is not None
        node_client(master).delete(checked)
        try:
            with pytest.raises(BoardUnavailableError):
                board_player_get(board=board, player_id=4)
        finally:
            node_client(master).restore(checked, 0, held)
        assert _reads(board) == from_master
    finally:
        faults.redis_cluster_start(replica)
        wait_for("a healthy Redis Cluster layout", lambda: healthy_layout(master), 60)
    get_board_redis().delete(key)


@pytest.mark.usefixtures("on_cluster", "redis_cluster_up")
def test_a_week_the_request_built_is_read_on_the_master(settings, client) -> None:
    """The week a request builds is on the master only until it replicates: read on a replica
    right away it answered ``[]`` once. The building request reads the master."""
    today = timezone.now().date()
    monday = today - timedelta(days=today.weekday() + 7)
    starts = datetime.combine(monday - timedelta(days=14), datetime.min.time(), tzinfo=UTC)
    season = make_season(starts_at=starts, ends_at=starts + timedelta(days=90))
    board_id = main_board_id(season.id)
    year, week, _ = monday.isocalendar()
    weekly = keys.weekly_board(board_id=board_id, iso_year=year, iso_week=week)
    master = int(get_board_redis().get_node_from_key(weekly).port)  # type: ignore[union-attr]
    master_id = next(n.node_id for n in topology(master) if n.port == master)
    replica = next(n.port for n in topology(master) if n.master_id == master_id)
    write_daily_board(get_board_redis(), season, monday, {1: (100, 10), 2: (150, 20)})
    settings.REDIS_READ_FROM_REPLICAS = True
    url = f"/api/seasons/{season.id}/leaderboard/weekly/{year}-W{week:02d}/top"

    # The read client routes this slot's reads to the replica: its slot map, refreshed after an
    # earlier test killed the replica, may lack it since it came back. Asked again, and shown
    # by the board's own reads.
    read_client = get_board_read_redis()
    assert isinstance(read_client, RedisCluster)
    season_key = keys.board(board_id=board_id)
    writer = node_client(master)
    write_board(writer, season_key, season, KNOWN_BOARD)
    assert writer.execute_command("WAIT", 1, 5000) >= 1

    def replica_reads_the_board() -> bool:
        before = _script_reads(replica)
        board_ranks_get(board=as_board(season), start_rank=1, count=10)
        if _script_reads(replica) > before:
            return True
        read_client.nodes_manager.initialize()
        return False

    wait_for("the replica serving the board's reads", replica_reads_the_board, 30)

    before = _script_reads(replica)
    assert client.get(url).json() == [entry(1, 2, 150), entry(2, 1, 100)]
    assert _script_reads(replica) == before
    for key in get_board_redis().scan_iter(match=keys.board_pattern(board_id=board_id)):
        get_board_redis().delete(key)
