"""The board stream: server-sent events of each board's top list, fed by the rank-events topic
(``manage.py serve_board_stream``; docs/events.md, "Live pages").

A process of its own, not gunicorn: a page holds its stream open, and a sync worker held per
open page would leave none for the API. Here every stream is a coroutine of one asyncio loop
(a few KB each), bounded in number (BOARD_STREAM_MAX_CLIENTS: past it, 503 and the page polls;
BOARD_STREAM_MAX_PER_CLIENT from one address, so one client cannot take every slot)
and in length (BOARD_STREAM_MAX_SECONDS: then the stream ends and the browser reconnects, so
a deploy or a rebalance of clients never waits on old connections).

What it sends, per board with at least one open stream: the board's top list
(``{"version", "entries"}``, the entries as GET .../top answers them) when a rank event touches
it (a rank or previous rank within the list), at most every FLUSH_SECONDS, and again every
REFRESH_SECONDS when it changed otherwise (a name hidden by staff, a rebuild). The list is read
from the live board (``board_top_read``), not the per-second snapshot, so an event's change is
in it. One Kafka consumer thread reads the events (from the end, no group offsets: a restarted
stream sends the current lists, not the past).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

import orjson
from confluent_kafka import OFFSET_END, Consumer, KafkaException, TopicPartition
from django.db import close_old_connections

from .rank_events import LIBRDKAFKA_LOGGER
from .selectors.boards import BoardRef, board_get_cached
from .selectors.top import board_top_read
from .serializers import entry_body
from .throttling import client_address, throttle_ident
from .views import PAGE_TOP

logger = logging.getLogger(__name__)

# The public page's list: events past it change nothing on the page.
TOP = PAGE_TOP
FLUSH_SECONDS = 0.25
# Under the 5 s a staff hide has to reach every read: a loop pass adds up to a flush and a read.
REFRESH_SECONDS = 4.0
HEARTBEAT_SECONDS = 15.0
# How long one write may wait for a client to take it: a live client reads a frame within a
# few seconds even on a poor network; one that takes none (a frozen tab) is let go.
DRAIN_SECONDS = 30.0
# EventSource waits this long before reconnecting after the server ends a stream.
RETRY_MS = 2000
_REQUEST_LIMIT = 8192
_REQUEST_TIMEOUT = 10.0
_PATH = re.compile(r"^/stream/seasons/(\d{1,18})/boards/([a-z0-9-]{1,32})$")

BoardKey = tuple[int, str]  # (season id, board slug), as the events name a board


@dataclass
class _Watched:
    """A board some stream is open on: its clients and what they were sent last."""

    board: BoardRef
    clients: set[asyncio.Queue[bytes]] = field(default_factory=set)
    sent: bytes = b""  # the last message sent (what a new client gets first)
    entries: bytes | None = None  # the entries it carried (None: "unavailable", or none yet)
    dirty: bool = True
    refreshed_at: float = 0.0


class BoardStreamServer:
    def __init__(
        self,
        *,
        bootstrap_servers: Sequence[str],
        topic: str,
        max_clients: int,
        max_per_client: int,
        max_seconds: float,
    ) -> None:
        self.bootstrap_servers = tuple(bootstrap_servers)
        self.topic = topic
        self.max_clients = max_clients
        self.max_per_client = max_per_client
        self.max_seconds = max_seconds
        self.clients = 0
        # Open streams per client (``throttle_ident``: an address, an IPv6 client's /64).
        self.per_client: dict[str, int] = {}
        self.port = 0  # the port it listens on, once serving
        self.boards: dict[BoardKey, _Watched] = {}
        self.stopping = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self.events_seen = 0

    # --- the rank events ----------------------------------------------------------------------

    def _consume(self) -> None:
        """The Kafka thread: mark the boards whose top list an event touches."""
        consumer = Consumer(
            {
                "bootstrap.servers": ",".join(self.bootstrap_servers),
                # Assigned, never subscribed: the group only names this client to the broker.
                "group.id": f"board-stream-{uuid.uuid4().hex[:12]}",
                "enable.auto.commit": False,
                "reconnect.backoff.max.ms": 1000,
                "logger": LIBRDKAFKA_LOGGER,
            }
        )
        try:
            while not self.stopping.is_set():
                try:
                    metadata = consumer.list_topics(self.topic, timeout=5)
                    partitions = metadata.topics[self.topic].partitions
                except KafkaException as exc:
                    logger.warning("board stream: no metadata for %s yet: %s", self.topic, exc)
                    partitions = {}
                if partitions:
                    break
                self.stopping.wait(1.0)
            consumer.assign([TopicPartition(self.topic, p, OFFSET_END) for p in partitions])
            logger.info("board stream: reading %s (%d partitions)", self.topic, len(partitions))
            while not self.stopping.is_set():
                try:
                    messages = consumer.consume(num_messages=1000, timeout=0.2)
                except KafkaException as exc:
                    # Raised, it ended this thread, and the pages moved only at the 4 s
                    # refresh from then on, without a word; librdkafka reconnects on its own.
                    logger.warning("board stream: reading %s failed: %s", self.topic, exc)
                    self.stopping.wait(1.0)
                    continue
                for message in messages:
                    if message.error():
                        continue
                    self._note(message.value())
        finally:
            consumer.close()

    def _note(self, value: bytes | None) -> None:
        try:
            event = orjson.loads(value or b"")
            key = (int(event["seasonId"]), str(event["board"]))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return
        self.events_seen += 1
        rank, previous = event.get("rank"), event.get("previousRank")
        if not (
            (isinstance(rank, int) and rank <= TOP)
            or (isinstance(previous, int) and previous <= TOP)
        ):
            return
        if key in self.boards and self._loop is not None:
            self._loop.call_soon_threadsafe(self._mark, key)

    def _mark(self, key: BoardKey) -> None:
        watched = self.boards.get(key)
        if watched is not None:
            watched.dirty = True
            assert self._wake is not None
            self._wake.set()

    # --- the lists ------------------------------------------------------------------------------

    @staticmethod
    def _read(board: BoardRef) -> tuple[int, bytes] | None:
        """The board's top list as the stream sends it: its version and its entries (JSON);
        None when the board cannot vouch for itself now (Redis lost it: the page says so, and
        keeps its list)."""
        # In a worker thread, outside any request: a connection PostgreSQL dropped (a restart)
        # or one past CONN_MAX_AGE is replaced before the read, or every read failed on it for
        # good (the failed one marks it unusable; this closes it).
        close_old_connections()
        top = board_top_read(board=board, count=TOP)
        if not top.intact:
            return None
        return top.version, orjson.dumps([entry_body(e) for e in top.entries])

    async def _refresh(self) -> None:
        """Send each watched board's list when an event touched it, or every REFRESH_SECONDS
        when it changed some other way."""
        assert self._wake is not None
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=FLUSH_SECONDS)
            self._wake.clear()
            now = time.monotonic()
            for key, watched in list(self.boards.items()):
                if not (watched.dirty or now - watched.refreshed_at >= REFRESH_SECONDS):
                    continue
                watched.dirty, watched.refreshed_at = False, now
                try:
                    read = await asyncio.to_thread(self._read, watched.board)
                except Exception:
                    logger.exception("board stream: reading board %s failed", key)
                    read = None
                entries = None if read is None else read[1]
                if watched.sent and entries == watched.entries:
                    continue  # the same list (a newer version of it changes nothing on screen)
                watched.entries = entries
                if read is None:
                    frame = b"event: unavailable\ndata: {}\n\n"
                else:
                    version = str(read[0]).encode()
                    frame = b'event: top\ndata: {"version":' + version + b',"entries":'
                    frame += read[1] + b"}\n\n"
                watched.sent = frame
                for queue in watched.clients:
                    _offer(queue, frame)
            await asyncio.sleep(FLUSH_SECONDS)

    # --- HTTP -----------------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._route(reader, writer)
        except Exception:
            # PostgreSQL or Redis away at the connection's start: the page polls meanwhile.
            logger.exception("board stream: a request failed")
            await _reply(writer, 503, b'{"detail": "the board stream is unavailable"}')

    async def _route(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _REQUEST_TIMEOUT)
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            writer.close()
            return
        try:
            method, path, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
        except ValueError:
            await _reply(writer, 400, b'{"detail": "malformed request"}')
            return
        path = path.split("?", 1)[0]
        if path == "/healthz":
            await _reply(writer, 200, b'{"status": "ok"}')
            return
        match = _PATH.match(path)
        if match is None:
            await _reply(writer, 404, b'{"detail": "no such stream"}')
            return
        if method != "GET":
            await _reply(writer, 405, b'{"detail": "GET only"}')
            return
        key = (int(match.group(1)), match.group(2))
        board = await asyncio.to_thread(_board_lookup, key)
        if board is None:
            await _reply(writer, 404, b'{"detail": "unknown season or board"}')
            return
        if self.clients >= self.max_clients:
            await _reply(writer, 503, b'{"detail": "too many streams"}', retry_after=30)
            return
        client = _client_ident(head, writer)
        if self.per_client.get(client, 0) >= self.max_per_client:
            await _reply(
                writer, 503, b'{"detail": "too many streams from this client"}', retry_after=30
            )
            return
        await self._stream(writer, key, board, client=client)

    async def _stream(
        self, writer: asyncio.StreamWriter, key: BoardKey, board: BoardRef, *, client: str
    ) -> None:
        queue: asyncio.Queue[bytes] = asyncio.Queue(maxsize=1)
        watched = self.boards.get(key)
        if watched is None:
            watched = self.boards[key] = _Watched(board)
        elif watched.board != board:
            # The board as looked up now (staff changed its options, its season closed): kept
            # from the first client, a board always watched was read as it was for good.
            watched.board, watched.dirty = board, True
        watched.clients.add(queue)
        self.clients += 1
        self.per_client[client] = self.per_client.get(client, 0) + 1
        try:
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Cache-Control: no-store\r\nAccess-Control-Allow-Origin: *\r\n"
                b"X-Accel-Buffering: no\r\nConnection: close\r\n\r\n"
                + f"retry: {RETRY_MS}\n\n".encode()
                + watched.sent
            )
            await _drained(writer)
            watched.dirty = watched.dirty or not watched.sent
            assert self._wake is not None
            self._wake.set()
            ends = time.monotonic() + self.max_seconds
            while (left := ends - time.monotonic()) > 0:
                try:
                    frame = await asyncio.wait_for(
                        queue.get(), timeout=min(left, HEARTBEAT_SECONDS)
                    )
                except TimeoutError:
                    if ends - time.monotonic() <= 0:
                        break  # the stream's time is up: no heartbeat to end it with
                    # A named event, not an SSE comment: live.js never sees comments, and
                    # gives up a stream it has heard nothing from in two heartbeats.
                    frame = b"event: ping\ndata: {}\n\n"
                writer.write(frame)
                await _drained(writer)
        except (ConnectionError, OSError, TimeoutError):
            # TimeoutError: a client that stopped reading (a frozen tab) with its socket's
            # buffers full; waiting on it would hold its slot past the stream's end forever.
            writer.transport.abort()
        finally:
            self.clients -= 1
            left = self.per_client.pop(client) - 1
            if left:
                self.per_client[client] = left
            watched.clients.discard(queue)
            if not watched.clients:
                self.boards.pop(key, None)
            with contextlib.suppress(ConnectionError, OSError):
                writer.close()

    # --- the process ----------------------------------------------------------------------------

    async def serve(self, *, host: str, port: int, ready: threading.Event | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        consumer = threading.Thread(target=self._consume, name="rank-events", daemon=True)
        consumer.start()
        server = await asyncio.start_server(self._handle, host, port, limit=_REQUEST_LIMIT)
        self.port = server.sockets[0].getsockname()[1]
        refresher = asyncio.create_task(self._refresh())
        logger.info("board stream: serving on %s:%d", host, self.port)
        if ready is not None:
            ready.set()
        try:
            async with server:
                while not self.stopping.is_set():
                    await asyncio.sleep(0.2)
        finally:
            refresher.cancel()
            self.stopping.set()
            consumer.join(timeout=5)


async def _drained(writer: asyncio.StreamWriter) -> None:
    """drain(), for at most DRAIN_SECONDS (a TimeoutError past it): drain() itself waits for
    as long as the client's receive window stays shut."""
    await asyncio.wait_for(writer.drain(), timeout=DRAIN_SECONDS)


def _client_ident(head: bytes, writer: asyncio.StreamWriter) -> str:
    """Whom a stream counts against (the API throttle's identity): the peer's address, or
    behind ``API_TRUSTED_PROXY_COUNT`` proxies what the outermost one saw (X-Forwarded-For)."""
    peer = writer.get_extra_info("peername")
    meta = {"REMOTE_ADDR": peer[0] if isinstance(peer, tuple) and peer else ""}
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"x-forwarded-for":
            # Repeated headers join as one list, as a WSGI server joins them.
            forwarded = value.decode("latin-1").strip()
            previous = meta.get("HTTP_X_FORWARDED_FOR")
            meta["HTTP_X_FORWARDED_FOR"] = f"{previous},{forwarded}" if previous else forwarded
    return throttle_ident(client_address(meta))


def _board_lookup(key: BoardKey) -> BoardRef | None:
    """The board a stream names (memoized per process). Outside any request, so the thread's
    database connection is checked here: one PostgreSQL dropped (a restart) is replaced."""
    close_old_connections()
    return board_get_cached(season_id=key[0], slug=key[1])


def _offer(queue: asyncio.Queue[bytes], frame: bytes) -> None:
    """Give a client the newest list: a slow one skips the lists it had no time for."""
    with contextlib.suppress(asyncio.QueueEmpty):
        queue.get_nowait()
    queue.put_nowait(frame)


async def _reply(
    writer: asyncio.StreamWriter, status: int, body: bytes, *, retry_after: int | None = None
) -> None:
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}.get(
        status, "Service Unavailable"
    )
    extra = f"Retry-After: {retry_after}\r\n" if retry_after else ""
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
        f"Access-Control-Allow-Origin: *\r\n{extra}Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n".encode()
        + body
    )
    with contextlib.suppress(ConnectionError, OSError):
        await writer.drain()
        writer.close()
