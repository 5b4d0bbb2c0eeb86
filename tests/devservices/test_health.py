"""Health checks: the replies parsed, and the decisions made from them (healthy cluster, a
cluster never created, a broker count), against fakes speaking the wire protocols."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Iterator

import pytest

from devservices import health
from devservices.health import (
    ApiRange,
    ProtocolError,
    cluster_healthy,
    cluster_never_created,
    parse_api_versions,
    parse_info,
    pick_metadata_version,
)

HEALTHY = {"cluster_state": "ok", "cluster_known_nodes": "6", "cluster_slots_assigned": "16384"}


def test_parse_info_skips_sections_and_blanks() -> None:
    text = "# Server\r\nredis_version:7.0.15\r\nconfig_file:/s/redis.conf\r\n\r\n# Cluster\r\n"
    assert parse_info(text) == {"redis_version": "7.0.15", "config_file": "/s/redis.conf"}


def test_a_cluster_is_healthy_with_state_ok_six_nodes_and_every_slot() -> None:
    assert cluster_healthy(HEALTHY)
    assert not cluster_healthy({**HEALTHY, "cluster_state": "fail"})
    assert not cluster_healthy({**HEALTHY, "cluster_known_nodes": "5"})
    assert not cluster_healthy({**HEALTHY, "cluster_slots_assigned": "10923"})
    assert not cluster_healthy({})


def test_a_cluster_is_created_only_when_no_node_knows_another_or_holds_a_slot() -> None:
    fresh = {"cluster_known_nodes": "1", "cluster_slots_assigned": "0"}
    assert cluster_never_created([fresh] * 6)
    # One node already met the others: the cluster exists (catching up), never create again.
    assert not cluster_never_created([fresh] * 5 + [{**fresh, "cluster_known_nodes": "6"}])
    assert not cluster_never_created([fresh] * 5 + [{**fresh, "cluster_slots_assigned": "5461"}])
    # A node that did not answer (empty info) is not proof of a fresh cluster.
    assert not cluster_never_created([fresh] * 5 + [{}])
    assert not cluster_never_created([])


# --- Redis over a fake server ---------------------------------------------------------------


@pytest.fixture
def fake_server() -> Iterator[Callable[[Callable[[socket.socket], None]], int]]:
    """``serve(handler)``: a one-connection TCP server on a free port running ``handler``."""
    threads: list[threading.Thread] = []
    listeners: list[socket.socket] = []

    def serve(handler: Callable[[socket.socket], None]) -> int:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listeners.append(listener)

        def accept() -> None:
            conn, _ = listener.accept()
            with conn:
                handler(conn)

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        threads.append(thread)
        return int(listener.getsockname()[1])

    yield serve
    for thread in threads:
        thread.join(timeout=5)
    for listener in listeners:
        listener.close()


def test_redis_ping_and_role_over_resp(fake_server) -> None:
    def pong(conn: socket.socket) -> None:
        assert conn.recv(100) == b"*1\r\n$4\r\nPING\r\n"
        conn.sendall(b"+PONG\r\n")

    assert health.redis_answers(fake_server(pong))

    def role(conn: socket.socket) -> None:
        conn.recv(100)
        conn.sendall(b"*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:7001\r\n$9\r\nconnected\r\n:42\r\n")

    assert health.redis_role(fake_server(role)) == "replica"


def test_a_listener_that_is_not_redis_does_not_answer(fake_server) -> None:
    def http(conn: socket.socket) -> None:
        conn.recv(100)
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

    assert not health.redis_answers(fake_server(http))


def test_a_redis_error_reply_is_not_an_answer(fake_server) -> None:
    def loading(conn: socket.socket) -> None:
        conn.recv(100)
        conn.sendall(b"-LOADING Redis is loading the dataset in memory\r\n")

    assert not health.redis_answers(fake_server(loading))


# --- Kafka ----------------------------------------------------------------------------------


def api_versions_body(apis: dict[int, tuple[int, int]], error: int = 0) -> bytes:
    body = struct.pack(">hi", error, len(apis))
    for key, (low, high) in apis.items():
        body += struct.pack(">hhh", key, low, high)
    return body


def kafka_string(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    return struct.pack(">h", len(text)) + text.encode()


def metadata_body(brokers: list[tuple[int, str, int]]) -> bytes:
    body = struct.pack(">ii", 0, len(brokers))
    for node_id, host, port in brokers:
        body += struct.pack(">i", node_id) + kafka_string(host) + struct.pack(">i", port)
        body += kafka_string(None)
    return body + kafka_string("cluster-id") + struct.pack(">ii", 1, 0)


def test_api_versions_parsed_even_with_unsupported_version() -> None:
    body = api_versions_body({3: (4, 13), 18: (0, 4)}, error=35)
    assert parse_api_versions(body) == {3: ApiRange(4, 13), 18: ApiRange(0, 4)}
    with pytest.raises(ProtocolError):
        parse_api_versions(api_versions_body({}, error=1))


@pytest.mark.parametrize(
    ("served", "picked"), [((0, 12), 8), ((4, 13), 8), ((4, 6), 6), ((8, 8), 8)]
)
def test_the_newest_non_flexible_metadata_version_is_picked(
    served: tuple[int, int], picked: int
) -> None:
    assert pick_metadata_version({3: ApiRange(*served)}) == picked


def test_no_usable_metadata_version_is_loud() -> None:
    with pytest.raises(ProtocolError, match="none of 4-8"):
        pick_metadata_version({3: ApiRange(9, 13)})
    with pytest.raises(ProtocolError):
        pick_metadata_version({})


def fake_broker(brokers: list[tuple[int, str, int]]) -> Callable[[socket.socket], None]:
    def handler(conn: socket.socket) -> None:
        for reply in (api_versions_body({3: (4, 13), 18: (0, 4)}), metadata_body(brokers)):
            (size,) = struct.unpack(">i", conn.recv(4))
            request = conn.recv(size)
            _api, _version, correlation = struct.unpack(">hhi", request[:8])
            frame = struct.pack(">i", correlation) + reply
            conn.sendall(struct.pack(">i", len(frame)) + frame)

    return handler


def test_the_broker_count_comes_from_a_metadata_request(fake_server) -> None:
    three = [(1, "127.0.0.1", 39092), (2, "127.0.0.1", 39093), (3, "127.0.0.1", 39094)]
    port = fake_server(fake_broker(three))
    assert health.kafka_registered(f"127.0.0.1:{port}", 3)
    port = fake_server(fake_broker(three[:2]))
    assert not health.kafka_registered(f"127.0.0.1:{port}", 3)


def test_the_next_bootstrap_address_is_tried_when_one_is_down(fake_server) -> None:
    port = fake_server(fake_broker([(1, "127.0.0.1", 1)]))
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        down = closed.getsockname()[1]
    assert health.kafka_registered(f"127.0.0.1:{down},127.0.0.1:{port}", 1)


def test_a_redis_on_the_kafka_port_is_not_kafka(fake_server) -> None:
    def redis_like(conn: socket.socket) -> None:
        conn.recv(100)
        conn.sendall(b"-ERR Protocol error: invalid multibulk length\r\n")

    assert not health.kafka_answers(f"127.0.0.1:{fake_server(redis_like)}")
