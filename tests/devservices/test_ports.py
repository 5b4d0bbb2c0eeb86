"""Who holds a port: ss's users:(...) field parsed; a listening socket seen as open."""

from __future__ import annotations

import socket

from devservices.ports import parse_ss_owner, port_open

SS_REDIS = (
    "LISTEN 0      511        127.0.0.1:6379       0.0.0.0:*    "
    'users:(("redis-server",pid=5186,fd=6))\n'
)
SS_TWO = (
    "LISTEN 0 4096 127.0.0.1:9092 0.0.0.0:* "
    'users:(("java",pid=5246,fd=150),("java",pid=5246,fd=151))\n'
    'LISTEN 0 4096 [::1]:9092 [::]:* users:(("socat",pid=77,fd=3))\n'
)


def test_the_owner_is_named_with_its_pid() -> None:
    assert parse_ss_owner(SS_REDIS) == "redis-server (pid 5186)"


def test_each_owner_once_across_descriptors_and_lines() -> None:
    assert parse_ss_owner(SS_TWO) == "java (pid 5246), socat (pid 77)"


def test_no_process_column_no_owner() -> None:
    # Without the privilege to see processes, ss prints the socket alone.
    assert parse_ss_owner("LISTEN 0 511 127.0.0.1:6379 0.0.0.0:*\n") == ""
    assert parse_ss_owner("") == ""


def test_port_open_sees_a_listener_and_not_a_closed_port() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert port_open(port)
    assert not port_open(port)
