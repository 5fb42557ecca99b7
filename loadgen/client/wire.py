"""A minimal HTTP/1.1 client for streamed responses, built on ``asyncio.Protocol``.

Why not aiohttp or httpx: streaming a token per SSE event costs them a task wake-up per event (the
response body is a stream the caller awaits, chunk by chunk). Measured on the 2-core development machine,
aiohttp's client spent about 2.5 ms of CPU per 64-token streamed request, four times this module, which
hands each body piece to a callback inside ``data_received``, with the time it arrived. At the hundreds of
requests per second an open-loop run needs, that is the difference between keeping to the schedule and
falling behind it (see ``bench/loadgen_rate.py``). The HTTP itself is parsed by httptools (llhttp, as in
uvicorn and Node.js), not here.

What this module adds: one host, HTTP/1.1 keep-alive connections in an unbounded pool (a bound would queue
requests in the client), ``http`` and ``https``, a retry on a fresh connection when a pooled one turns out
to have been closed by the server before it answered. What it does not: proxies, redirects, compression,
HTTP/2.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from typing import Protocol
from urllib.parse import urlsplit

import httptools

__all__ = ["BodySink", "Collect", "ConnectionPool", "Disconnected", "ProtocolError"]

_MAX_HEAD = 64 * 1024
_READ_SIZE = 64 * 1024


class Disconnected(ConnectionError):
    """The server closed the connection before the response was complete."""


class ProtocolError(Exception):
    """The server's answer is not HTTP/1.1 this client can read (the message says what was wrong)."""


class BodySink(Protocol):
    """Receives one response: its head, then body pieces as they arrive."""

    def head(self, status: int, headers: dict[str, str]) -> None: ...

    def feed(self, data: bytes, now: float) -> None: ...


class Collect:
    """A sink that keeps the status and up to ``limit`` bytes of the body."""

    def __init__(self, limit: int = 1 << 20) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body = b""
        self._limit = limit

    def head(self, status: int, headers: dict[str, str]) -> None:
        self.status, self.headers = status, headers

    def feed(self, data: bytes, now: float) -> None:
        if len(self.body) < self._limit:
            self.body += data[: self._limit - len(self.body)]


class Connection(asyncio.BufferedProtocol):
    """One HTTP/1.1 connection; runs one request at a time.

    httptools (the llhttp parser uvicorn uses) reads the framing: status line, headers, chunked or
    ``Content-Length`` bodies, trailers, 1xx interim answers, and calls back here with each piece, inside
    the same ``data_received`` call, so every body piece is stamped with the time its bytes arrived.

    A buffered protocol: the transport reads into this connection's own buffer (``recv_into``) instead of
    allocating a fresh 256 KiB bytes object per read, which matters at one read per streamed token.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._rbuf = bytearray(_READ_SIZE)
        self._rview = memoryview(self._rbuf)
        self._parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._future: asyncio.Future[bool] | None = None
        self._sink: BodySink | None = None
        self._now = 0.0
        self._headers: dict[str, str] = {}
        self._head_bytes = 0
        self._until_close = False  # neither chunked nor Content-Length: the body ends with the connection
        self._got_bytes = False

    # --- asyncio callbacks ---

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._until_close:
            self._complete(keep=False)
            return
        fut = self._future
        if fut is not None and not fut.done():
            if self._got_bytes:
                fut.set_exception(Disconnected("the server closed the connection mid-response"))
            else:
                fut.set_exception(_Stale(str(exc) if exc else "closed before answering"))

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._rview

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(self._rview[:nbytes])

    def data_received(self, data: bytes | memoryview) -> None:
        if self._future is None:
            self.abort()  # bytes nobody asked for: this connection's framing can no longer be trusted
            return
        self._now = self._clock()
        self._got_bytes = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as err:
            # A callback's own ProtocolError comes back wrapped in the parser's error.
            cause = err.__context__ if isinstance(err.__context__, ProtocolError) else None
            self._fail(cause or ProtocolError(f"not an HTTP/1.x answer: {err}"))

    # --- httptools callbacks ---

    def on_message_begin(self) -> None:
        self._headers, self._head_bytes = {}, 0

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_bytes += len(name) + len(value) + 4  # as on the wire: ": " and CRLF
        if self._head_bytes > _MAX_HEAD:
            raise ProtocolError(f"response head longer than {_MAX_HEAD} bytes")
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1").strip()

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if status < 200:  # 1xx: an interim answer; the real head follows
            return
        framed = "content-length" in self._headers or "chunked" in self._headers.get("transfer-encoding", "").lower()
        self._until_close = not framed
        if self._sink is not None:
            self._sink.head(status, self._headers)

    def on_body(self, body: bytes) -> None:
        if self._sink is not None:
            self._sink.feed(body, self._now)

    def on_message_complete(self) -> None:
        if self._parser.get_status_code() >= 200:
            self._complete(keep=self._parser.should_keep_alive())

    # --- requests ---

    def start(self, payload: bytes, sink: BodySink, future: asyncio.Future[bool]) -> None:
        assert self.transport is not None
        self._future, self._sink = future, sink
        self._got_bytes, self._until_close = False, False
        self.transport.write(payload)

    def abort(self) -> None:
        self.closed = True
        self._future, self._sink = None, None
        if self.transport is not None:
            self.transport.abort()

    def _fail(self, err: Exception) -> None:
        fut = self._future
        self.abort()
        if fut is not None and not fut.done():
            fut.set_exception(err)

    def _complete(self, *, keep: bool) -> None:
        fut, self._future, self._sink = self._future, None, None
        self._until_close = False
        if fut is not None and not fut.done():
            fut.set_result(keep and not self.closed)


class _Stale(ConnectionError):
    """A pooled connection was closed by the server before it answered (safe to retry once)."""


class ConnectionPool:
    """Keep-alive HTTP/1.1 connections to the host of ``base_url``, without a size limit."""

    def __init__(
        self, base_url: str, *, connect_timeout: float = 10.0, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        url = urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"target URL {base_url!r} must be http://HOST[:PORT][/PATH] or https://...")
        self.host = url.hostname
        self.port = url.port or (443 if url.scheme == "https" else 80)
        self.prefix = url.path.rstrip("/")
        self._host_header = url.netloc.rsplit("@", 1)[-1]
        self._ssl = ssl.create_default_context() if url.scheme == "https" else None
        self._connect_timeout = connect_timeout
        self._clock = clock
        self._idle: list[Connection] = []
        self._busy: set[Connection] = set()

    def head(self, method: str, path: str, *, content_length: int | None = None, accept: str = "*/*") -> bytes:
        """The request head for ``path`` (under the base URL's path)."""
        lines = [
            f"{method} {self.prefix}{path} HTTP/1.1",
            f"Host: {self._host_header}",
            "User-Agent: inferscale-loadgen",
            f"Accept: {accept}",
        ]
        if content_length is not None:
            lines += ["Content-Type: application/json", f"Content-Length: {content_length}"]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _connect(self) -> Connection:
        loop = asyncio.get_running_loop()
        clock = self._clock
        async with asyncio.timeout(self._connect_timeout):
            _, conn = await loop.create_connection(lambda: Connection(clock), self.host, self.port, ssl=self._ssl)
        return conn

    async def request(self, payload: bytes, sink: BodySink) -> None:
        """Send ``payload`` (head and body) and feed the answer to ``sink`` until it is complete.

        Raises ``ConnectionRefusedError``/``OSError`` when no connection can be made, ``TimeoutError`` when
        connecting takes too long, ``Disconnected`` when the server closes mid-answer, ``ProtocolError``.
        """
        loop = asyncio.get_running_loop()
        for attempt in range(2):
            conn: Connection | None = None
            while self._idle:
                candidate = self._idle.pop()
                if not candidate.closed:
                    conn = candidate
                    break
            reused = conn is not None
            if conn is None:
                conn = await self._connect()
            future: asyncio.Future[bool] = loop.create_future()
            self._busy.add(conn)
            try:
                conn.start(payload, sink, future)
                keep = await future
            except _Stale as err:
                conn.abort()
                if reused and attempt == 0:
                    continue
                raise Disconnected(f"the server closed the connection before answering: {err}") from None
            except BaseException:
                conn.abort()
                raise
            finally:
                self._busy.discard(conn)
            if keep and not conn.closed:
                self._idle.append(conn)
            else:
                conn.abort()
            return

    def close(self) -> None:
        """Close every connection, idle or busy."""
        for conn in [*self._idle, *self._busy]:
            conn.abort()
        self._idle.clear()
        self._busy.clear()
