"""A minimal HTTP/1.1 client for streamed responses, built on ``asyncio.Protocol``.

Why not aiohttp or httpx: streaming a token per SSE event costs them a task wake-up per event (the
response body is a stream the caller awaits, chunk by chunk). Measured on the 2-core development machine,
aiohttp's client spent about 2.5 ms of CPU per 64-token streamed request, four times this module, which
decodes the body inside ``data_received`` and hands each piece to a callback with the time it arrived. At
the hundreds of requests per second an open-loop run needs, that is the difference between keeping to the
schedule and falling behind it (see ``bench/loadgen_rate.py``).

What it does: one host, HTTP/1.1 keep-alive connections in an unbounded pool (a bound would queue requests
in the client), ``Content-Length`` and chunked bodies, ``http`` and ``https``, a retry on a fresh connection
when a pooled one turns out to have been closed by the server before it answered. What it does not:
proxies, redirects, compression, HTTP/2.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from typing import Protocol
from urllib.parse import urlsplit

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


_HEAD, _CHUNKED, _LENGTH, _UNTIL_CLOSE, _DONE = range(5)


class _Connection(asyncio.BufferedProtocol):
    """One HTTP/1.1 connection; runs one request at a time.

    A buffered protocol: the transport reads into this connection's own buffer (``recv_into``) instead of
    allocating a fresh 256 KiB bytes object per read, which matters at one read per streamed token.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._rbuf = bytearray(_READ_SIZE)
        self._rview = memoryview(self._rbuf)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._future: asyncio.Future[bool] | None = None
        self._sink: BodySink | None = None
        self._state = _DONE
        self._buf = b""
        self._left = 0
        self._crlf = False
        self._trailers = False
        self._keep = True
        self._got_bytes = False

    # --- asyncio callbacks ---

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._state == _UNTIL_CLOSE:
            self._complete()
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
        self.data_received(bytes(self._rview[:nbytes]))

    def data_received(self, data: bytes) -> None:
        now = self._clock()
        self._got_bytes = True
        try:
            if self._state == _HEAD:
                data = self._read_head(data)
                if self._state == _HEAD:
                    return
            if self._state == _CHUNKED:
                self._read_chunked(data, now)
            elif self._state == _LENGTH:
                take = data[: self._left]
                self._left -= len(take)
                if take:
                    self._feed(take, now)
                if self._left == 0:
                    self._complete()
            elif self._state == _UNTIL_CLOSE:
                self._feed(data, now)
        except ProtocolError as err:
            self._fail(err)

    # --- requests ---

    def start(self, payload: bytes, sink: BodySink, future: asyncio.Future[bool]) -> None:
        assert self.transport is not None
        self._future, self._sink = future, sink
        self._state, self._buf, self._got_bytes, self._keep = _HEAD, b"", False, True
        self._left, self._crlf, self._trailers = 0, False, False
        self.transport.write(payload)

    def abort(self) -> None:
        self.closed = True
        self._state = _DONE
        if self.transport is not None:
            self.transport.abort()

    # --- parsing ---

    def _feed(self, data: bytes, now: float) -> None:
        if self._sink is not None:
            self._sink.feed(data, now)

    def _fail(self, err: Exception) -> None:
        fut = self._future
        self.abort()
        if fut is not None and not fut.done():
            fut.set_exception(err)

    def _complete(self) -> None:
        self._state = _DONE
        fut, self._future, self._sink = self._future, None, None
        if fut is not None and not fut.done():
            fut.set_result(self._keep and not self.closed)

    def _read_head(self, data: bytes) -> bytes:
        buf = self._buf + data if self._buf else data
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > _MAX_HEAD:
                raise ProtocolError(f"response head longer than {_MAX_HEAD} bytes")
            self._buf = buf
            return b""
        self._buf = b""
        lines = buf[:end].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise ProtocolError(f"not an HTTP/1.x status line: {lines[0][:100]!r}")
        status = int(parts[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if status < 200:  # 1xx: an interim answer; the real head follows
            return self._read_head(buf[end + 4 :])
        self._keep = headers.get("connection", "").lower() != "close" and parts[0] == "HTTP/1.1"
        assert self._sink is not None
        self._sink.head(status, headers)
        rest = buf[end + 4 :]
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._state = _CHUNKED
        elif "content-length" in headers:
            try:
                self._left = int(headers["content-length"])
            except ValueError:
                raise ProtocolError(f"bad Content-Length {headers['content-length']!r}") from None
            self._state = _LENGTH
            if self._left == 0:
                self._complete()
        else:
            self._state = _UNTIL_CLOSE
            self._keep = False
        return rest

    def _read_chunked(self, data: bytes, now: float) -> None:
        if not (self._buf or self._left or self._crlf or self._trailers):
            # The common case while streaming: exactly one whole chunk in this read.
            eol = data.find(b"\r\n", 0, 18)
            if eol > 0:
                try:
                    size = int(data[:eol], 16)
                except ValueError:
                    size = -1
                end = eol + 2 + size
                if size > 0 and len(data) == end + 2 and data.endswith(b"\r\n"):
                    self._feed(data[eol + 2 : end], now)
                    return
        buf = self._buf + data if self._buf else data
        pos, n = 0, len(buf)
        out: list[bytes] = []
        finished = False
        while pos < n:
            if self._left:
                take = min(self._left, n - pos)
                out.append(buf[pos : pos + take])
                pos += take
                self._left -= take
                if not self._left:
                    self._crlf = True
                continue
            if self._crlf:
                if n - pos < 2:
                    break
                if buf[pos : pos + 2] != b"\r\n":
                    raise ProtocolError("a chunk is not followed by CRLF")
                pos += 2
                self._crlf = False
                continue
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                break
            if self._trailers:
                empty = eol == pos
                pos = eol + 2
                if empty:  # the blank line after the last chunk (and any trailers): the answer is complete
                    finished = True
                    break
                continue
            size_text = buf[pos:eol].split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise ProtocolError(f"bad chunk size {size_text[:20]!r}") from None
            pos = eol + 2
            if size == 0:
                self._trailers = True
            else:
                self._left = size
        self._buf = buf[pos:]
        if out:
            self._feed(b"".join(out), now)
        if finished:
            self._buf = b""
            self._complete()


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
        self._idle: list[_Connection] = []
        self._busy: set[_Connection] = set()

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

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        clock = self._clock
        async with asyncio.timeout(self._connect_timeout):
            _, conn = await loop.create_connection(lambda: _Connection(clock), self.host, self.port, ssl=self._ssl)
        return conn

    async def request(self, payload: bytes, sink: BodySink) -> None:
        """Send ``payload`` (head and body) and feed the answer to ``sink`` until it is complete.

        Raises ``ConnectionRefusedError``/``OSError`` when no connection can be made, ``TimeoutError`` when
        connecting takes too long, ``Disconnected`` when the server closes mid-answer, ``ProtocolError``.
        """
        loop = asyncio.get_running_loop()
        for attempt in range(2):
            conn: _Connection | None = None
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
