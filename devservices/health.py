"""Does a port answer as the expected service? Real requests, with short timeouts (a foreign
listener that never replies must not hang a start):

- Redis: RESP over a socket (PING, INFO, CLUSTER INFO, ROLE);
- Kafka: ApiVersions, then a Metadata request, in the wire protocol (non-flexible versions,
  which every broker from 2.x to 4.x serves): the broker count it returns is the number of
  registered, unfenced brokers (a KRaft broker that restarted and has not caught up is fenced
  and not listed);
- PostgreSQL: ``select 1`` with psql as the application user over TCP (postgres.py).

The decisions made from the answers (is the cluster healthy, was it never created) are pure
functions of the parsed replies, next to the parsers.
"""

from __future__ import annotations

import itertools
import socket
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from devservices.config import HOST, REDIS_CLUSTER_SIZE

REDIS_TIMEOUT = 5.0
KAFKA_TIMEOUT = 5.0
CLUSTER_SLOTS = 16384


class ProtocolError(Exception):
    """The peer answered, but not as the expected service."""


# --------------------------------------------------------------------------------------------
# Redis
# --------------------------------------------------------------------------------------------

RespValue = str | int | list["RespValue"] | None


def resp_encode(*args: str) -> bytes:
    parts = [f"*{len(args)}\r\n".encode()]
    for arg in args:
        data = arg.encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


class _Reader:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ProtocolError("connection closed mid-reply")
        self.buf += chunk

    def line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def exact(self, n: int) -> bytes:
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2 :]
        return data


def resp_read(reader: _Reader) -> RespValue:
    line = reader.line()
    kind, rest = line[:1], line[1:].decode(errors="replace")
    if kind == b"+":
        return rest
    if kind == b"-":
        raise ProtocolError(f"Redis error: {rest}")
    if kind == b":":
        return int(rest)
    if kind == b"$":
        size = int(rest)
        return None if size < 0 else reader.exact(size).decode(errors="replace")
    if kind == b"*":
        size = int(rest)
        return None if size < 0 else [resp_read(reader) for _ in range(size)]
    raise ProtocolError(f"not a Redis reply: {line[:40]!r}")


def redis_command(port: int, *args: str, host: str = HOST) -> RespValue:
    with socket.create_connection((host, port), timeout=REDIS_TIMEOUT) as sock:
        sock.settimeout(REDIS_TIMEOUT)
        sock.sendall(resp_encode(*args))
        return resp_read(_Reader(sock))


def redis_answers(port: int) -> bool:
    try:
        return redis_command(port, "PING") == "PONG"
    except (OSError, ProtocolError, ValueError):
        return False


def parse_info(text: str) -> dict[str, str]:
    """INFO / CLUSTER INFO: ``key:value`` lines (section headers and blanks skipped)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#") and ":" in line:
            key, value = line.split(":", 1)
            fields[key] = value
    return fields


def redis_info(port: int, *args: str) -> dict[str, str]:
    """INFO <section> or CLUSTER INFO (``args``), parsed; empty when the node does not answer."""
    try:
        reply = redis_command(port, *args)
    except (OSError, ProtocolError, ValueError):
        return {}
    return parse_info(reply) if isinstance(reply, str) else {}


def redis_role(port: int) -> str:
    """master, replica, or down."""
    try:
        reply = redis_command(port, "ROLE")
    except (OSError, ProtocolError, ValueError):
        return "down"
    first = reply[0] if isinstance(reply, list) and reply else None
    return {"master": "master", "slave": "replica"}.get(str(first), str(first or "down"))


def cluster_healthy(info: Mapping[str, str], size: int = REDIS_CLUSTER_SIZE) -> bool:
    """cluster_state:ok, every node known, every slot assigned (as one node sees it)."""
    return (
        info.get("cluster_state") == "ok"
        and info.get("cluster_known_nodes") == str(size)
        and info.get("cluster_slots_assigned") == str(CLUSTER_SLOTS)
    )


def cluster_never_created(infos: Sequence[Mapping[str, str]]) -> bool:
    """Every node knows only itself and holds no slot: ``--cluster create`` has not run.

    Anything else (a node that knows others, a slot assigned) is a cluster that exists and is
    catching up, which a second create would break."""
    return bool(infos) and all(
        info.get("cluster_known_nodes") == "1" and info.get("cluster_slots_assigned") == "0"
        for info in infos
    )


# --------------------------------------------------------------------------------------------
# Kafka
# --------------------------------------------------------------------------------------------

API_METADATA = 3
API_VERSIONS = 18
# Metadata v4..v8: non-flexible encoding, null-or-array topics, and (v8) two extra booleans.
METADATA_VERSIONS = range(4, 9)
CLIENT_ID = "lb-services-check"
_correlation = itertools.count(1)


@dataclass(frozen=True)
class ApiRange:
    min_version: int
    max_version: int


def kafka_request(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    client = CLIENT_ID.encode()
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client)) + client
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


class _Buffer:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise ProtocolError("truncated Kafka response")
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return int(value)

    def string(self) -> str | None:
        size = self.take(">h")
        if size < 0:
            return None
        if self.pos + size > len(self.data):
            raise ProtocolError("truncated Kafka response")
        value = self.data[self.pos : self.pos + size].decode(errors="replace")
        self.pos += size
        return value


def parse_api_versions(response: bytes) -> dict[int, ApiRange]:
    """ApiVersions v0 response body (after the correlation id)."""
    buf = _Buffer(response)
    error = buf.take(">h")
    # 35 (UNSUPPORTED_VERSION) still lists what the broker serves.
    if error not in (0, 35):
        raise ProtocolError(f"ApiVersions error code {error}")
    apis: dict[int, ApiRange] = {}
    for _ in range(buf.take(">i")):
        key, low, high = buf.take(">h"), buf.take(">h"), buf.take(">h")
        apis[key] = ApiRange(low, high)
    return apis


def pick_metadata_version(apis: Mapping[int, ApiRange]) -> int:
    served = apis.get(API_METADATA)
    if served is None:
        raise ProtocolError("the broker serves no Metadata requests")
    usable = [v for v in METADATA_VERSIONS if served.min_version <= v <= served.max_version]
    if not usable:
        raise ProtocolError(
            f"Metadata versions {served.min_version}-{served.max_version}: none of 4-8 served"
        )
    return max(usable)


def metadata_body(version: int) -> bytes:
    # No topics (an empty array, not null = all topics); no auto-creation.
    body = struct.pack(">ib", 0, 0)
    if version >= 8:
        body += struct.pack(">bb", 0, 0)
    return body


@dataclass(frozen=True)
class Broker:
    node_id: int
    host: str
    port: int


def parse_metadata_brokers(response: bytes) -> list[Broker]:
    """The broker list of a Metadata v4..v8 response body (after the correlation id)."""
    buf = _Buffer(response)
    buf.take(">i")  # throttle_time_ms
    brokers = []
    for _ in range(buf.take(">i")):
        node_id = buf.take(">i")
        host = buf.string() or ""
        port = buf.take(">i")
        buf.string()  # rack
        brokers.append(Broker(node_id, host, port))
    return brokers


def _exchange(sock: socket.socket, request: bytes, correlation_id: int) -> bytes:
    sock.sendall(request)
    reader = _Reader(sock)
    while len(reader.buf) < 4:
        reader._fill()
    (size,) = struct.unpack(">i", reader.buf[:4])
    if not 4 <= size <= 64 * 1024 * 1024:
        raise ProtocolError(f"not a Kafka response (size {size})")
    while len(reader.buf) < 4 + size:
        reader._fill()
    frame = reader.buf[4 : 4 + size]
    (got,) = struct.unpack(">i", frame[:4])
    if got != correlation_id:
        raise ProtocolError(f"correlation id {got}, expected {correlation_id}")
    return frame[4:]


def kafka_brokers(address: str) -> list[Broker]:
    """The registered, unfenced brokers, as the broker at ``address`` (host:port) knows them."""
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=KAFKA_TIMEOUT) as sock:
        sock.settimeout(KAFKA_TIMEOUT)
        cid = next(_correlation)
        apis = parse_api_versions(_exchange(sock, kafka_request(API_VERSIONS, 0, cid, b""), cid))
        version = pick_metadata_version(apis)
        cid = next(_correlation)
        request = kafka_request(API_METADATA, version, cid, metadata_body(version))
        return parse_metadata_brokers(_exchange(sock, request, cid))


def kafka_answers(address: str) -> bool:
    try:
        return bool(kafka_brokers(address))
    except (OSError, ProtocolError, ValueError):
        return False


def kafka_registered(bootstrap: str, want: int) -> bool:
    """At least ``want`` unfenced brokers, as seen through any address of ``bootstrap``."""
    for address in bootstrap.split(","):
        try:
            return len(kafka_brokers(address)) >= want
        except (OSError, ProtocolError, ValueError):
            continue
    return False
